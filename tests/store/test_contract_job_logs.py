"""Job-log storage on every store (store/job_logs.py): lines written in one
call read back by attempt after a cursor, each attempt capped to its newest
lines, removed with their job (SQL at once, Redis by the sweep) whether an
operator deleted it or retention purged it: what is stored is looked at, since
a gone job's lines cannot be read through ``read_logs``."""

from __future__ import annotations

from store.base import JobStore
from store.job_logs import LogLine, append_logs, read_logs, sweep_logs
from store.lifecycle import JobStatus
from store.maintenance import run_retention


def _lines(job_id: str, attempt: int, n: int, start: int = 0) -> list[LogLine]:
    return [LogLine(job_id, attempt, 1000.0 + i, "INFO", f"a{attempt} l{i}") for i in range(start, start + n)]


def _stored(store: JobStore, job_id: str, attempts: int = 2) -> int:
    """Lines of ``job_id`` the store still holds, read from its storage: SQL
    rows, or the Redis lists of the job's shard (its count hash is there
    exactly when lines are)."""
    if hasattr(store, "tx"):
        from sqlalchemy import func, select

        from store.sql.schema import job_logs

        count = select(func.count()).select_from(job_logs).where(job_logs.c.job_id == job_id)
        return store.tx(lambda c: c.execute(count).scalar_one(), write=False)
    held = metas = 0
    for shard in getattr(store, "shards", [store]):
        client, keys = shard._client, shard.keys
        held += sum(client.llen(keys.logs(job_id, a)) for a in range(1, attempts + 1))
        metas += client.exists(keys.logs_meta(job_id))
    assert metas == (1 if held else 0)
    return held


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
    assert _stored(store, job.id) == 0
    append_logs(store, _lines(job.id, 1, 1, start=9), keep=5)  # a late write of the deleted job
    store.clock_offset_s += 7200
    sweep_logs(store)
    assert _stored(store, job.id) == 0
    assert [x["message"] for x in read_logs(store, other.id)[0]] == ["a1 l0"]
    assert _stored(store, other.id) == 1


def test_a_retention_purge_takes_the_lines_with_their_job(store: JobStore) -> None:
    old = store.cancel(store.enqueue("t", {"old": True}).id)
    store.clock_offset_s += 7200
    young = store.cancel(store.enqueue("t", {"old": False}).id)
    now = store.now()
    append_logs(store, [LogLine(j.id, 1, now, "INFO", "ran") for j in (old, young) for _ in range(3)])
    assert _stored(store, old.id) > 0
    run = run_retention(store, {JobStatus.Canceled: 3600}, owner="test")
    assert run is not None and run.count == 1  # the old job only
    store.clock_offset_s += 7200  # the maintenance after: Redis's sweep looks again an hour on
    sweep_logs(store)
    assert _stored(store, old.id) == 0
    append_logs(store, [LogLine(old.id, 1, store.now(), "INFO", "late")])  # a write after the purge
    store.clock_offset_s += 7200
    sweep_logs(store)
    assert _stored(store, old.id) == 0
    assert [x["message"] for x in read_logs(store, young.id)[0]] == ["ran"] * 3
