"""Job logs on the SQL store (store/job_logs.py): rows of
``leasehold_job_logs``, written and trimmed in one transaction, read by the
index (job_id, attempt, id); the cursor is the row id. Removed with their
job by ``SqlOperatingPart.remove_jobs`` (``delete_logs_of``); a write that
comes after its job was removed (a canceled run's last lines, its job then
deleted or purged) keeps nothing: ``append`` writes the lines of the jobs it
finds, each row held against a removal (``jobs_present``) until it commits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Delete, Select, and_, bindparam, delete, insert, select
from sqlalchemy.engine import Connection

from store.log_lines import LogLine
from store.sql.schema import job_logs, jobs

c = job_logs.c


def insert_lines() -> Any:
    """Insert one line. Params: job_id, attempt, at, level, message (executemany)."""
    return insert(job_logs)


def jobs_present() -> Select[Any]:
    """Which of some jobs exist, each row held until the transaction ends
    against a removal (PostgreSQL ``FOR KEY SHARE``: an update of the job
    goes on; a DELETE waits, and one that went first is not seen; SQLite's
    writers take turns). Params: ids (expanding)."""
    where = jobs.c.id.in_(bindparam("ids", expanding=True))
    return select(jobs.c.id).where(where).with_for_update(read=True, key_share=True)


def trim_attempt() -> Delete:
    """Delete an attempt's lines but its newest ``keep``. Params: job, attempt, keep."""
    job, attempt = bindparam("job"), bindparam("attempt")
    newest_dropped = (
        select(c.id)
        .where(c.job_id == job, c.attempt == attempt)
        .order_by(c.id.desc())
        .limit(1)
        .offset(bindparam("keep"))
        .scalar_subquery()
    )
    return delete(job_logs).where(c.job_id == job, c.attempt == attempt, c.id <= newest_dropped)


def lines_after(with_attempt: bool) -> Select[Any]:
    """A job's lines after a cursor, oldest first. Params: job, after, limit (and attempt)."""
    where = [c.job_id == bindparam("job"), c.id > bindparam("after")]
    if with_attempt:
        where.append(c.attempt == bindparam("attempt"))
    return (
        select(c.id, c.attempt, c.at, c.level, c.message)
        .where(and_(*where))
        .order_by(c.id)
        .limit(bindparam("limit"))
    )


def delete_logs_of() -> Delete:
    """Delete the lines of jobs. Params: ids (expanding)."""
    return delete(job_logs).where(c.job_id.in_(bindparam("ids", expanding=True)))


def append(store: Any, lines: Sequence[LogLine], keep: int) -> None:
    """The lines of the jobs that still exist, each attempt then trimmed to
    its newest ``keep``; one transaction. The job rows are locked first, as
    a removal locks them first, so a write and a removal of one job wait
    for each other in turn, never in a cycle."""

    def body(conn: Connection) -> None:
        ids = sorted({x.job_id for x in lines})
        present = set(conn.execute(jobs_present(), {"ids": ids}).scalars())
        kept = [x for x in lines if x.job_id in present]
        if not kept:
            return
        rows = [
            {"job_id": x.job_id, "attempt": x.attempt, "at": x.at, "level": x.level, "message": x.message}
            for x in kept
        ]
        attempts = sorted({(x.job_id, x.attempt) for x in kept})
        conn.execute(insert_lines(), rows)
        conn.execute(trim_attempt(), [{"job": j, "attempt": a, "keep": keep} for j, a in attempts])

    store.tx(body)


def read(store: Any, job_id: str, attempt: int | None, after: int, limit: int) -> tuple[list[dict], int]:
    params = {"job": job_id, "after": after, "limit": limit, "attempt": attempt}
    stmt = lines_after(attempt is not None)
    rows = store.tx(lambda conn: conn.execute(stmt, params).all(), write=False)
    out = [{"attempt": r.attempt, "at": r.at, "level": r.level, "message": r.message} for r in rows]
    return out, (rows[-1].id if rows else after)


def sweep(_store: Any, _limit: int) -> int:
    return 0  # deleted with their job (remove_jobs)
