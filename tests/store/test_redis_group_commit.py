"""Group commit of single plain enqueues on Redis (store/group_commit.py):
the jobs that arrive while one is written go in the next lua/enqueue.lua
call together, and each caller gets its own job."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pytest

from store.lifecycle import JobStatus as S
from store.redis.store import RedisStore
from tests.backends import BACKENDS
from tests.store.helpers import enqueue_five_while_the_first_is_held

pytestmark = pytest.mark.skipif("redis" not in BACKENDS, reason="Redis not among the test backends")


def test_jobs_that_arrive_during_a_write_share_the_next_call(
    redis_store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, gate, calls = redis_store, threading.Event(), []
    real = store._eval

    def held_first(script: Any, keys: list[str], args: list[Any], client: Any = None) -> Any:
        if script is store._lua.enqueue:
            calls.append(args)
            if len(calls) == 1:
                gate.wait(10)  # the first write waits here with its own job alone
        return real(script, keys, args, client)

    monkeypatch.setattr(store, "_eval", held_first)
    hold = contextlib.ExitStack()
    hold.callback(gate.set)  # leaving it lets the first write go on
    enqueue_five_while_the_first_is_held(store, store._group, hold, lambda: calls)
    assert len(calls) == 2  # the first job alone, then the four together


def test_a_single_enqueue_survives_its_held_connection_being_killed(redis_store: RedisStore) -> None:
    """Single enqueues go through one connection held for the group commit's
    writer (no pool checkout a call); when the server drops it (CLIENT KILL,
    a restart, an idle timeout), the next enqueue reconnects and the job is
    written once."""
    store = redis_store
    first = store.enqueue("t")
    writer = store._writer()
    assert store._writer() is writer and writer is not store._client
    held = writer.client_id()
    assert store._client.client_kill_filter(_id=held) == 1
    second = store.enqueue("t")
    assert writer.client_id() != held
    assert [store.get(j.id).status for j in (first, second)] == [S.Queued, S.Queued]
    assert store.count_jobs(S.Queued) == 2
