"""Named SQL statements of the SQL store, one function per operation.

Each function takes ``now``, the store's clock as a SQL expression (see
``store_now``), and returns a SQLAlchemy Core statement whose bind parameters
are named in its docstring. The store builds them once and reuses them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Double,
    Insert,
    Select,
    SmallInteger,
    Text,
    Update,
    bindparam,
    case,
    func,
    insert,
    literal_column,
    select,
    tuple_,
    update,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement

from store.lifecycle import JobStatus, Operation, source_codes
from store.sql.changes import const, enqueue_values, guarded_update
from store.sql.rows import JSON_COLUMNS, NEW_JOB_TIMES
from store.sql.schema import Json, counters, job_events, jobs
from store.sql.schema import queues as queue_states

IN_PROGRESS = int(JobStatus.InProgress)


#: An expires_at later than any clock: a job without one (``due``).
NEVER = "1e18"

#: Actor prefix of operator actions (the audit log).
OPERATOR_PREFIX = "operator:"


class store_now(FunctionElement):  # noqa: N801 - named like the SQL function it renders
    """The database server's clock in epoch seconds (double precision)."""

    type = Double()
    inherit_cache = True


@compiles(store_now, "postgresql")
def _now_pg(element: store_now, compiler: object, **kw: object) -> str:
    # date_part returns double precision; statement_timestamp() moves within a transaction.
    return "date_part('epoch', statement_timestamp())"


@compiles(store_now, "sqlite")
def _now_sqlite(element: store_now, compiler: object, **kw: object) -> str:
    # julianday('now') has millisecond precision; 2440587.5 is the Julian day of 1970-01-01.
    return "((julianday('now') - 2440587.5) * 86400.0)"


class bucket_start(FunctionElement):  # noqa: N801 - named like the SQL it renders
    """Start of the ``width``-second bucket holding epoch time ``t``:
    ``floor(t / width) * width``."""

    type = Double()
    inherit_cache = True


@compiles(bucket_start, "postgresql")
def _bucket_pg(element: bucket_start, compiler: Any, **kw: Any) -> str:
    t, width = list(element.clauses)
    divided = f"floor(({compiler.process(t, **kw)}) / ({compiler.process(width, **kw)}))"
    return f"({divided} * ({compiler.process(width, **kw)}))"


@compiles(bucket_start, "sqlite")
def _bucket_sqlite(element: bucket_start, compiler: Any, **kw: Any) -> str:
    # CAST truncates toward zero, which is floor for times after 1970. Each
    # operand is processed where it appears: SQLite's parameters are positional.
    t, width = list(element.clauses)
    divided = f"CAST(({compiler.process(t, **kw)}) / ({compiler.process(width, **kw)}) AS INTEGER)"
    return f"({divided} * ({compiler.process(width, **kw)}))"


class json_with_at(FunctionElement):  # noqa: N801 - named like the SQL it renders
    """A JSON object with its key ``at`` set to a number: ``json_with_at(obj, t)``
    (PostgreSQL ``jsonb_set``, SQLite ``json_set``), so one statement can stamp
    a JSON value with the store's clock."""

    type = Json
    inherit_cache = True


@compiles(json_with_at, "postgresql")
def _json_at_pg(element: json_with_at, compiler: Any, **kw: Any) -> str:
    obj, at = list(element.clauses)
    return f"jsonb_set({compiler.process(obj, **kw)}, '{{at}}', to_jsonb({compiler.process(at, **kw)}))"


@compiles(json_with_at, "sqlite")
def _json_at_sqlite(element: json_with_at, compiler: Any, **kw: Any) -> str:
    obj, at = list(element.clauses)
    return f"json_set({compiler.process(obj, **kw)}, '$.at', {compiler.process(at, **kw)})"


def clock(offset_s: object) -> ColumnElement[float]:
    """``store_now() + :clock_offset``; ``offset_s`` is a callable giving the
    offset in seconds at execution time (0 except when tests move the clock)."""
    return store_now() + bindparam("clock_offset", callable_=offset_s, type_=Double())


def select_now(now: ColumnElement[float]) -> Select:
    """The store's clock. No parameters."""
    return select(now)


def insert_jobs(now: ColumnElement[float]) -> Insert:
    """Insert jobs (executemany), Operation.ENQUEUE's values from the table
    (``changes.enqueue_values``). Params: the job columns except times and
    zeroes, the JSON columns (``rows.JSON_COLUMNS``) as JSON texts (or None), ``delay``
    (seconds until due) and ``delay_until`` (the same, or None when not
    delayed). Returns, in parameter order, each job's id and the times the
    database set (``rows.NEW_JOB_TIMES``): the caller has the rest."""
    texts = {column: bindparam(column, type_=Text()) for column in JSON_COLUMNS}
    table = enqueue_values(now, bindparam("delay", type_=Double()), bindparam("delay_until", type_=Double()))
    return (
        insert(jobs)
        .values(**texts, **table)
        .returning(jobs.c.id, *(jobs.c[t] for t in NEW_JOB_TIMES), sort_by_parameter_order=True)
    )


def job_by_id() -> Select:
    """One job. Params: j_id."""
    return select(jobs).where(jobs.c.id == bindparam("j_id"))


def job_by_idempotency_key() -> Select:
    """The job enqueued with a key. Params: key."""
    return select(jobs).where(jobs.c.idempotency_key == bindparam("key"))


def lock_job_for_update() -> Select:
    """Lock one job row for a read-decide-write change. Params: j_id."""
    return select(jobs).where(jobs.c.id == bindparam("j_id")).with_for_update()


def due(
    stmt: Select, now: ColumnElement[float], queues: int, limited: bool = False, one: bool = False
) -> Select:
    """Due jobs of the named queues in claim order, written so the planner walks
    ix_jobs_ready in order and stops at LIMIT: the status codes are literals
    (implying the partial index's predicate) and one queue is an equality.
    Jobs of a paused queue are never due (``queues.paused``); jobs of a
    limited queue (``queues.limited``) only to its own claim (``limited``:
    ``store/sql/flow.py``), which decides the limits. A job past its
    expires_at is never due (``store/sql/expiry.py`` ends it). With ``one``,
    only the job whose id is the parameter ``job`` (a notice named it)."""
    waiting = jobs.c.status.in_([literal_column(str(code)) for code in source_codes(Operation.CLAIM)])
    if one:
        waiting = waiting & (jobs.c.id == bindparam("job"))
    if queues == 1:
        in_queue = jobs.c.queue == bindparam("q0")
    else:
        in_queue = jobs.c.queue.in_([bindparam(f"q{i}") for i in range(queues)])
    held = queue_states.c.paused == const(1)
    if not limited:
        held = held | (queue_states.c.limited == const(1))
    paused = select(queue_states.c.name).where(held)
    # Not expired (lifecycle.is_expired), a NULL expiry as NEVER: one comparison, a shorter text.
    live = func.coalesce(jobs.c.expires_at, literal_column(NEVER)) > now
    return (
        stmt.where(
            waiting, in_queue, jobs.c.due_at <= now, live, jobs.c.queue.not_in(paused.scalar_subquery())
        )
        .order_by(jobs.c.priority.desc(), jobs.c.due_at, jobs.c.id)
        .limit(bindparam("limit"))
    )


def claim_candidates_sqlite(now: ColumnElement[float], queues: int, one: bool = False) -> Select:
    """SQLite claim, step 1 (inside BEGIN IMMEDIATE): due jobs. Params:
    q0..qN, limit; with ``one``, job (only that job)."""
    return due(select(jobs.c.id, jobs.c.status), now, queues, one=one)


def claim_sqlite(now: ColumnElement[float]) -> Update:
    """SQLite claim, step 2: lease the picked ids. Params: ids (expanding), worker_id, ttl."""
    return lease(now, where=[jobs.c.id.in_(bindparam("ids", expanding=True))]).returning(*jobs.c)


def lease(now: ColumnElement[float], where: Sequence[ColumnElement[bool]], sources: bool = True) -> Update:
    """Operation.CLAIM on the jobs ``where`` picks: InProgress, the worker,
    the next fencing token, ``lease_expires_at = now + ttl`` (the job's own
    lease_ttl_seconds wins). Params: worker_id, ttl."""
    ttl = func.coalesce(jobs.c.lease_ttl_seconds, bindparam("ttl", type_=Double()))
    values = {
        "worker_id": bindparam("worker_id"),
        "lease_token": jobs.c.lease_token + const(1),
        "lease_expires_at": now + ttl,
    }
    return guarded_update(Operation.CLAIM, now, where=where, values=values, sources=sources)


def renew_leases(now: ColumnElement[float]) -> Update:
    """Heartbeat: extend current, unexpired leases. Rows another transaction
    holds are skipped, not waited for (FOR UPDATE SKIP LOCKED on PostgreSQL):
    one locked job must not stall the renewal of every other lease in the
    batch. Params: pairs (expanding (id, token) tuples), ttl. Returns the
    renewed (id, lease_token, lease_expires_at)."""
    ttl = func.coalesce(jobs.c.lease_ttl_seconds, bindparam("ttl", type_=Double()))
    live = (
        select(jobs.c.id)
        .where(
            tuple_(jobs.c.id, jobs.c.lease_token).in_(bindparam("pairs", expanding=True)),
            jobs.c.status == IN_PROGRESS,
            jobs.c.lease_expires_at >= now,
        )
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    return (
        update(jobs)
        .where(jobs.c.id.in_(live))
        .values(lease_expires_at=now + ttl, last_heartbeat_at=now)
        .returning(jobs.c.id, jobs.c.lease_token, jobs.c.lease_expires_at)
    )


def live_leases(now: ColumnElement[float]) -> Select:
    """Which of some leases are still valid (current token, InProgress, not
    expired), read without locks: a renewal that skipped them was deferred,
    not refused. Params: pairs (expanding (id, token) tuples). Returns ids."""
    return select(jobs.c.id).where(
        tuple_(jobs.c.id, jobs.c.lease_token).in_(bindparam("pairs", expanding=True)),
        jobs.c.status == IN_PROGRESS,
        jobs.c.lease_expires_at >= now,
    )


def tokens_of() -> Select:
    """Current token and status of some jobs (for refusal messages). Params: ids (expanding)."""
    return select(jobs.c.id, jobs.c.lease_token, jobs.c.status, jobs.c.queue).where(
        jobs.c.id.in_(bindparam("ids", expanding=True))
    )


def complete_job(now: ColumnElement[float]) -> Update:
    """Ack guarded by status and token (Operation.COMPLETE), of a job no other
    waits for (a parent's ack releases its children: ``store/sql/flow.py``).
    Params: j_id, token, new_result."""
    return guarded_update(
        Operation.COMPLETE,
        now,
        where=[
            jobs.c.id == bindparam("j_id"),
            jobs.c.lease_token == bindparam("token"),
            jobs.c.has_children == const(0),
        ],
        values={"result": bindparam("new_result")},
    ).returning(*jobs.c)


def failure_values(
    now: ColumnElement[float], status: Any, retry_count: Any, delay: Any, error: Any, expired: Any
) -> dict[str, Any]:
    """The SET clause of a retry decision (Operation.FAIL's ``writes``), from
    SQL expressions: the new status and retry_count, ``delay`` seconds until
    due (NULL when Failed), the error, and 0/1 added to lease_expirations."""
    return {
        "status": status,
        "retry_count": retry_count,
        "lease_expirations": jobs.c.lease_expirations + expired,
        "error": error,
        "retry_delay_until": now + delay,
        "due_at": func.coalesce(now + delay, now),
        "completed_at": case((status == int(JobStatus.Failed), now), else_=None),
    }


def apply_failure(now: ColumnElement[float], expired_only: bool = False) -> Update:
    """Apply a retry decision guarded by status and token (and, for recovery,
    by the lease still being expired). Params: j_id, token, new_status,
    new_retry_count, delay (seconds or None), new_error, expired (0 or 1 added to
    lease_expirations)."""
    guard = [jobs.c.id == bindparam("j_id"), jobs.c.lease_token == bindparam("token")]
    if expired_only:
        guard.append(jobs.c.lease_expires_at < now)
    values = failure_values(
        now,
        bindparam("new_status", type_=SmallInteger()),
        bindparam("new_retry_count"),
        bindparam("delay", type_=Double()),
        bindparam("new_error"),
        bindparam("expired"),
    )
    return guarded_update(Operation.FAIL, now, where=guard, values=values).returning(*jobs.c)


def release_job(now: ColumnElement[float]) -> Update:
    """Give a lease back (Operation.RELEASE: Scheduled, due now). Params: j_id, token."""
    return guarded_update(
        Operation.RELEASE,
        now,
        where=[jobs.c.id == bindparam("j_id"), jobs.c.lease_token == bindparam("token")],
    ).returning(*jobs.c)


def operator_change(
    now: ColumnElement[float], op: Operation, values: dict[str, object] | None = None
) -> Update:
    """An operator operation guarded by its sources and by the status read
    under lock. Params: j_id, old_status, plus any bind parameters in ``values``."""
    where = [jobs.c.id == bindparam("j_id"), jobs.c.status == bindparam("old_status")]
    return guarded_update(op, now, where=where, values=values).returning(*jobs.c)


def expired_leases(now: ColumnElement[float], lock: bool) -> Select:
    """InProgress jobs whose lease expired, oldest first; with ``lock``, rows
    another recoverer holds are skipped (FOR UPDATE SKIP LOCKED). Params: limit."""
    stmt = (
        select(
            jobs.c.id,
            jobs.c.name,
            jobs.c.queue,
            jobs.c.worker_id,
            jobs.c.lease_token,
            jobs.c.retry_count,
            jobs.c.max_retries,
            jobs.c.lease_expires_at,
            jobs.c.started_at,
            jobs.c.has_children,
        )
        .where(jobs.c.status == IN_PROGRESS, jobs.c.lease_expires_at < now)
        .order_by(jobs.c.lease_expires_at)
        .limit(bindparam("limit"))
    )
    return stmt.with_for_update(skip_locked=True) if lock else stmt


def count_expired(now: ColumnElement[float]) -> Select:
    """How many leases have expired (index range on ix_jobs_lease). No params."""
    return select(func.count()).where(jobs.c.status == IN_PROGRESS, jobs.c.lease_expires_at < now)


def count_named(with_queue: bool) -> Select:
    """Jobs of one status and name (and queue): an index count (ix_jobs_name_updated).
    Params: status, name[, queue]."""
    where = [jobs.c.status == bindparam("status"), jobs.c.name == bindparam("name")]
    if with_queue:
        where.append(jobs.c.queue == bindparam("queue"))
    return select(func.count().label("n")).where(*where)


def list_jobs(filters: Sequence[ColumnElement[bool]], with_cursor: bool, ascending: bool = False) -> Select:
    """Keyset page by ``(last_updated_at, id)``, newest first unless
    ``ascending``. Params: limit, and c_at, c_id with a cursor."""
    stmt = select(jobs).where(*filters)
    key = tuple_(jobs.c.last_updated_at, jobs.c.id)
    if with_cursor:
        after = tuple_(bindparam("c_at"), bindparam("c_id"))
        stmt = stmt.where(key > after if ascending else key < after)
    if ascending:
        return stmt.order_by(jobs.c.last_updated_at, jobs.c.id).limit(bindparam("limit"))
    return stmt.order_by(jobs.c.last_updated_at.desc(), jobs.c.id.desc()).limit(bindparam("limit"))


def job_events_of() -> Select:
    """The newest events of a job. Params: job_id, limit."""
    return (
        select(job_events)
        .where(job_events.c.job_id == bindparam("job_id"))
        .order_by(job_events.c.id.desc())
        .limit(bindparam("limit"))
    )


def sum_counters() -> Select:
    """Every counter summed over its shards. No params."""
    return select(counters.c.key, func.sum(counters.c.n)).group_by(counters.c.key)
