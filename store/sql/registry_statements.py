"""Named statements of the SQL store's registry: locks, worker processes and
the recovery-run history. Same conventions as ``statements.py``; none of
these touch jobs.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, Delete, Double, Insert, Select, bindparam, delete, insert, select

from store.sql.schema import locks, recovery_runs, workers


def acquire_lock(ins: Insert, now: ColumnElement[float]) -> Insert:
    """Take the lock if free, expired or ours. Params: name, owner, ttl.
    Returns the owner when taken."""
    ins = ins.values(
        name=bindparam("name"),
        owner=bindparam("owner"),
        expires_at=now + bindparam("ttl", type_=Double()),
    )
    return ins.on_conflict_do_update(
        index_elements=[locks.c.name],
        set_={"owner": ins.excluded.owner, "expires_at": ins.excluded.expires_at},
        where=(locks.c.owner == ins.excluded.owner) | (locks.c.expires_at < now),
    ).returning(locks.c.owner)


def release_lock() -> Delete:
    """Compare-and-delete the lock. Params: name, owner."""
    return delete(locks).where(locks.c.name == bindparam("name"), locks.c.owner == bindparam("owner"))


def lock_holder(now: ColumnElement[float]) -> Select:
    """The lock's unexpired holder. Params: name."""
    return select(locks.c.owner, locks.c.expires_at).where(
        locks.c.name == bindparam("name"), locks.c.expires_at >= now
    )


def upsert_worker(ins: Insert, now: ColumnElement[float]) -> Insert:
    """Register or refresh a worker. Params: id, host, pid, queues, concurrency,
    jobs_in_hand, started_at."""
    ins = ins.values(last_seen_at=now)
    return ins.on_conflict_do_update(
        index_elements=[workers.c.id],
        set_={
            "host": ins.excluded.host,
            "pid": ins.excluded.pid,
            "started_at": ins.excluded.started_at,
            "queues": ins.excluded.queues,
            "concurrency": ins.excluded.concurrency,
            "jobs_in_hand": ins.excluded.jobs_in_hand,
            "last_seen_at": ins.excluded.last_seen_at,
        },
    )


def delete_worker() -> Delete:
    """Drop a worker. Params: id."""
    return delete(workers).where(workers.c.id == bindparam("id"))


def all_workers() -> Select:
    """Workers, most recently seen first. No params."""
    return select(workers).order_by(workers.c.last_seen_at.desc())


def insert_recovery_run() -> Insert:
    """Record a recovery run. Params: the recovery_runs columns."""
    return insert(recovery_runs)


def trim_recovery_runs() -> Delete:
    """Drop recovery runs older than the newest ``kept``. Params: kept."""
    newest = (
        select(recovery_runs.c.id)
        .order_by(recovery_runs.c.started_at.desc(), recovery_runs.c.id.desc())
        .limit(bindparam("kept"))
    )
    return delete(recovery_runs).where(recovery_runs.c.id.not_in(newest.scalar_subquery()))


def recent_recovery_runs() -> Select:
    """Recovery history, newest first. Params: limit."""
    return select(recovery_runs).order_by(recovery_runs.c.started_at.desc()).limit(bindparam("limit"))
