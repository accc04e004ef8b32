"""Group commit of single plain enqueues on Redis (store/group_commit.py):
the jobs that arrive while one is written go in the next lua/enqueue.lua
call together, and each caller gets its own job."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from store.redis.store import RedisStore
from tests.backends import BACKENDS
from tests.workers.procs import wait_until

pytestmark = pytest.mark.skipif("redis" not in BACKENDS, reason="Redis not among the test backends")


def test_jobs_that_arrive_during_a_write_share_the_next_call(
    redis_store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, gate, calls = redis_store, threading.Event(), []
    real = store._eval

    def held_first(script: Any, keys: list[str], args: list[Any]) -> Any:
        if script is store._lua.enqueue:
            calls.append(args)
            if len(calls) == 1:
                gate.wait(10)  # the first write waits here with its own job alone
        return real(script, keys, args)

    monkeypatch.setattr(store, "_eval", held_first)
    group = store._group
    got: dict[int, Any] = {}
    threads = [
        threading.Thread(target=lambda i=i: got.__setitem__(i, store.enqueue("t", {"i": i})))
        for i in range(5)
    ]
    threads[0].start()
    wait_until(lambda: calls, timeout=10, what="the first write")
    for thread in threads[1:]:
        thread.start()
    wait_until(lambda: len(group._pending) == 4, timeout=10, what="four jobs waiting")
    gate.set()
    for thread in threads:
        thread.join(10)
    assert sorted(got) == list(range(5))
    assert [got[i].payload for i in range(5)] == [{"i": i} for i in range(5)]
    assert all(store.get(job.id).payload == job.payload for job in got.values())
    assert len(calls) == 2  # the first job alone, then the four together
