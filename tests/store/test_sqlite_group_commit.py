"""Group commit of single-job enqueues on SQLite (store/group_commit.py):
the jobs that arrive while one is written go in the next transaction
together, each caller gets its own job, and a failed batch is written again
one job at a time."""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import event

from store.group_commit import GroupCommit
from store.sql.store import SqlStore
from tests.store.helpers import enqueue_five_while_the_first_is_held
from tests.workers.procs import wait_until


def test_jobs_that_arrive_during_a_write_share_the_next_transaction(sqlite_store: SqlStore) -> None:
    store = sqlite_store
    group = store.dialect._group  # type: ignore[attr-defined]
    begins: list[int] = []
    event.listen(store.write_engine, "begin", lambda conn: begins.append(1))
    # the first writer waits on the writer lock with its own job alone
    started = lambda: group._writing and not group._pending  # noqa: E731
    enqueue_five_while_the_first_is_held(store, group, store._writer, started)
    assert len(begins) == 2  # the first job alone, then the four together
    assert not group._writing and not group._pending


def test_a_failed_batch_is_written_again_one_job_at_a_time() -> None:
    gate, calls = threading.Event(), []

    def write(rows: list[dict[str, Any]]) -> list[Any]:
        calls.append([r["id"] for r in rows])
        if len(calls) == 1:
            gate.wait(10)
        bad = [r["id"] for r in rows if r["bad"]]
        if bad:
            raise ValueError(bad[0])
        return [r["id"] for r in rows]

    group = GroupCommit(write)  # type: ignore[arg-type]
    out: dict[str, Any] = {}

    def insert(job_id: str, bad: bool) -> None:
        try:
            out[job_id] = group.insert({"id": job_id, "bad": bad})
        except ValueError as exc:
            out[job_id] = exc

    first = threading.Thread(target=insert, args=("a", False))
    first.start()
    wait_until(lambda: calls, timeout=10, what="the first write")
    others = [threading.Thread(target=insert, args=(j, j == "b")) for j in ("b", "c")]
    for thread in others:
        thread.start()
    wait_until(lambda: len(group._pending) == 2, timeout=10, what="two jobs waiting")
    gate.set()
    for thread in [first, *others]:
        thread.join(10)
    assert calls == [["a"], ["b", "c"], ["b"], ["c"]]
    assert out["a"] == "a" and out["c"] == "c"
    assert isinstance(out["b"], ValueError) and str(out["b"]) == "b"
