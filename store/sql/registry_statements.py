"""Named statements of the SQL store's registry: locks, worker processes,
run histories (recovery, maintenance), paused queues and schedules. Same
conventions as ``statements.py``; none of these touch jobs.
"""

from __future__ import annotations

from sqlalchemy import (
    ColumnElement,
    Delete,
    Double,
    Insert,
    Select,
    Update,
    bindparam,
    case,
    delete,
    insert,
    select,
    update,
)

from store.sql.schema import (
    failures,
    locks,
    maintenance_runs,
    operations,
    queues,
    recovery_runs,
    schedules,
    workers,
)


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
    """Register or refresh a worker (a command left for it is kept). Params:
    id, host, pid, queues, concurrency, jobs_in_hand, handlers, started_at. Returns
    the worker's pending command."""
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
            "handlers": ins.excluded.handlers,
            "last_seen_at": ins.excluded.last_seen_at,
        },
    ).returning(workers.c.command)


def command_worker() -> Update:
    """Leave a command for a worker. Params: w_id, w_command, w_by. Returns the row."""
    return (
        update(workers)
        .where(workers.c.id == bindparam("w_id"))
        .values(command=bindparam("w_command"), command_by=bindparam("w_by"))
        .returning(*workers.c)
    )


def clear_worker_command(only: str | None = None) -> Update:
    """Clear a worker's command and who sent it; with ``only``, just when
    the command is ``only``. Params: w_id."""
    stmt = update(workers).where(workers.c.id == bindparam("w_id"))
    if only is not None:
        stmt = stmt.where(workers.c.command == only)
    return stmt.values(command=None, command_by=None)


def worker_by_id() -> Select:
    """One worker's row. Params: w_id."""
    return select(workers).where(workers.c.id == bindparam("w_id"))


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


def set_queue_paused(ins: Insert, now: ColumnElement[float]) -> Insert:
    """Pause or resume a queue (upsert); ``ins`` is the dialect's INSERT of
    ``queues``. Params: name, paused (0/1), actor. Returns the row."""
    ins = ins.values(
        name=bindparam("name"), paused=bindparam("paused"), changed_by=bindparam("actor"), changed_at=now
    )
    return ins.on_conflict_do_update(
        index_elements=[queues.c.name],
        set_={"paused": ins.excluded.paused, "changed_by": ins.excluded.changed_by, "changed_at": now},
    ).returning(*queues.c)


def all_queue_states() -> Select:
    """Queues ever paused or resumed, by name. No params."""
    return select(queues).order_by(queues.c.name)


def stale_workers(now: ColumnElement[float]) -> Delete:
    """Remove workers not seen for ``age`` seconds. Params: age. Returns ids."""
    return (
        delete(workers)
        .where(workers.c.last_seen_at < now - bindparam("age", type_=Double()))
        .returning(workers.c.id)
    )


def insert_maintenance_run() -> Insert:
    """Record a maintenance run. Params: the maintenance_runs columns."""
    return insert(maintenance_runs)


def trim_maintenance_runs() -> Delete:
    """Drop runs of a task older than its newest ``kept``. Params: task, kept."""
    newest = (
        select(maintenance_runs.c.id)
        .where(maintenance_runs.c.task == bindparam("task"))
        .order_by(maintenance_runs.c.started_at.desc(), maintenance_runs.c.id.desc())
        .limit(bindparam("kept"))
    )
    return delete(maintenance_runs).where(
        maintenance_runs.c.task == bindparam("task"), maintenance_runs.c.id.not_in(newest.scalar_subquery())
    )


def recent_maintenance_runs() -> Select:
    """Runs of a task, newest first. Params: task, limit."""
    return (
        select(maintenance_runs)
        .where(maintenance_runs.c.task == bindparam("task"))
        .order_by(maintenance_runs.c.started_at.desc())
        .limit(bindparam("limit"))
    )


def save_schedule(ins: Insert, now: ColumnElement[float]) -> Insert:
    """Upsert a schedule's definition, keeping enabled and the last tick;
    ``ins`` is the dialect's INSERT of ``schedules``. Params: name, handler,
    cron, timezone, queue, payload, catch_up."""
    ins = ins.values(updated_at=now)
    kept = ("handler", "cron", "timezone", "queue", "payload", "catch_up")
    return ins.on_conflict_do_update(
        index_elements=[schedules.c.name],
        set_={**{c: ins.excluded[c] for c in kept}, "updated_at": now},
    )


def all_schedules() -> Select:
    """Every schedule, by name. No params."""
    return select(schedules).order_by(schedules.c.name)


def set_schedule_enabled(now: ColumnElement[float]) -> Update:
    """Turn a schedule on or off. Params: s_name, s_enabled (0/1). Returns the row."""
    return (
        update(schedules)
        .where(schedules.c.name == bindparam("s_name"))
        .values(enabled=bindparam("s_enabled"), updated_at=now)
        .returning(*schedules.c)
    )


def record_tick() -> Update:
    """A tick enqueued; last_tick_at only moves forward. Params: s_name, s_tick, s_job."""
    tick = bindparam("s_tick", type_=Double())
    return (
        update(schedules)
        .where(
            schedules.c.name == bindparam("s_name"),
            schedules.c.last_tick_at.is_(None) | (schedules.c.last_tick_at <= tick),
        )
        .values(last_tick_at=tick, last_job_id=bindparam("s_job"))
    )


def record_failure(ins: Insert, now: ColumnElement[float]) -> Insert:
    """Count a failure: a new window of ``window`` seconds when none is open.
    ``ins`` is the dialect's INSERT of ``failures``. Params: f_key, window.
    Returns n and window_end."""
    window = bindparam("window", type_=Double())
    ins = ins.values(key=bindparam("f_key"), n=1, window_end=now + window)
    expired = failures.c.window_end <= now
    return ins.on_conflict_do_update(
        index_elements=[failures.c.key],
        set_={
            "n": case((expired, 1), else_=failures.c.n + 1),
            "window_end": case((expired, now + window), else_=failures.c.window_end),
        },
    ).returning(failures.c.n, failures.c.window_end)


def failure_count(now: ColumnElement[float]) -> Select:
    """The open window of a key: n and seconds left. Params: f_key."""
    return select(failures.c.n, failures.c.window_end - now).where(
        failures.c.key == bindparam("f_key"), failures.c.window_end > now
    )


def clear_failures() -> Delete:
    """Forget a key's failures. Params: f_key."""
    return delete(failures).where(failures.c.key == bindparam("f_key"))


def save_operation(ins: Insert, now: ColumnElement[float]) -> Insert:
    """Insert or replace a bulk operation; created_at kept. ``ins`` is the
    dialect's INSERT of ``operations``. Params: o_id, o_state, o_body.
    Returns created_at and updated_at."""
    ins = ins.values(
        id=bindparam("o_id"),
        state=bindparam("o_state"),
        created_at=now,
        updated_at=now,
        body=bindparam("o_body"),
    )
    return ins.on_conflict_do_update(
        index_elements=[operations.c.id],
        set_={"state": ins.excluded.state, "updated_at": now, "body": ins.excluded.body},
    ).returning(operations.c.created_at, operations.c.updated_at)


def operation_by_id() -> Select:
    """One bulk operation. Params: o_id."""
    return select(operations).where(operations.c.id == bindparam("o_id"))


def recent_operations(unfinished: bool) -> Select:
    """Bulk operations: newest first, or the unfinished oldest first. Params: limit."""
    if unfinished:
        stmt = select(operations).where(operations.c.state.in_(["queued", "running"]))
        return stmt.order_by(operations.c.created_at).limit(bindparam("limit"))
    return select(operations).order_by(operations.c.created_at.desc()).limit(bindparam("limit"))
