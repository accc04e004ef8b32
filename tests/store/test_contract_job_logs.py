"""Job-log storage on every store (store/job_logs.py): lines written in one
call read back by attempt after a cursor, each attempt capped to its newest
lines, removed with their job (SQL at once, Redis by the sweep)."""

from __future__ import annotations

from store.base import JobStore
from store.job_logs import LogLine, append_logs, read_logs, sweep_logs


def _lines(job_id: str, attempt: int, n: int, start: int = 0) -> list[LogLine]:
    return [LogLine(job_id, attempt, 1000.0 + i, "INFO", f"a{attempt} l{i}") for i in range(start, start + n)]


def test_by_attempt_after_a_cursor_capped_and_gone_with_the_job(store: JobStore) -> None:
    job, other = store.enqueue("t", {}), store.enqueue("t", {})
    append_logs(store, _lines(job.id, 1, 3) + _lines(job.id, 2, 2) + _lines(other.id, 1, 1), keep=5)
    lines, _ = read_logs(store, job.id)
    assert [x["message"] for x in lines] == ["a1 l0", "a1 l1", "a1 l2", "a2 l0", "a2 l1"]
    assert [x["message"] for x in read_logs(store, job.id, attempt=2)[0]] == ["a2 l0", "a2 l1"]
    page, after = read_logs(store, job.id, limit=2)
    assert [x["message"] for x in page] == ["a1 l0", "a1 l1"]
    assert [x["message"] for x in read_logs(store, job.id, after=after)[0]] == ["a1 l2", "a2 l0", "a2 l1"]
    append_logs(store, _lines(job.id, 1, 4, start=3), keep=5)  # 7 lines: the newest 5 stay
    assert [x["message"] for x in read_logs(store, job.id, attempt=1)[0]] == [f"a1 l{i}" for i in range(2, 7)]
    cursor = read_logs(store, job.id)[1]
    append_logs(store, _lines(job.id, 2, 4, start=2), keep=5)  # the running attempt logs on
    newer, _ = read_logs(store, job.id, after=cursor)  # a tail: only what came since
    assert [x["message"] for x in newer] == ["a2 l2", "a2 l3", "a2 l4", "a2 l5"]
    assert [x["message"] for x in read_logs(store, job.id, attempt=2)[0]] == [f"a2 l{i}" for i in range(1, 6)]
    store.delete(job.id)
    store.clock_offset_s += 7200
    sweep_logs(store)
    append_logs(store, _lines(job.id, 1, 1, start=9), keep=5)  # a late write of the deleted job
    store.clock_offset_s += 7200
    sweep_logs(store)
    assert [x["message"] for x in read_logs(store, other.id)[0]] == ["a1 l0"]
