"""Named SQL statements of the SQL store, one function per operation.

Each function takes ``now``, the store's clock as a SQL expression (see
``store_now``), and returns a SQLAlchemy Core statement whose bind parameters
are named in its docstring. The store builds them once and reuses them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Delete,
    Double,
    Insert,
    Select,
    SmallInteger,
    String,
    Text,
    Update,
    bindparam,
    case,
    cast,
    delete,
    func,
    insert,
    literal,
    literal_column,
    null,
    select,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement

from store.lifecycle import JobStatus, Operation, source_codes
from store.sql.schema import counters, job_events, jobs, locks, recovery_runs, workers

IN_PROGRESS = int(JobStatus.InProgress)
FINISHED = (int(JobStatus.Completed), int(JobStatus.Failed), int(JobStatus.Canceled))


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


def clock(offset_s: object) -> ColumnElement[float]:
    """``store_now() + :clock_offset``; ``offset_s`` is a callable giving the
    offset in seconds at execution time (0 except when tests move the clock)."""
    return store_now() + bindparam("clock_offset", callable_=offset_s, type_=Double())


def select_now(now: ColumnElement[float]) -> Select:
    """The store's clock. No parameters."""
    return select(now)


def insert_jobs(now: ColumnElement[float]) -> Insert:
    """Insert jobs (executemany). Params: the job columns except times, ``delay``
    (seconds until due) and ``delay_until`` (the same, or None when not delayed)."""
    return (
        insert(jobs)
        .values(
            created_at=now,
            last_updated_at=now,
            due_at=now + bindparam("delay", type_=Double()),
            retry_delay_until=now + bindparam("delay_until", type_=Double()),
        )
        .returning(*jobs.c, sort_by_parameter_order=True)
    )


def insert_events(now: ColumnElement[float]) -> Insert:
    """Append job events (executemany). Params: job_id, kind, from_status,
    to_status, actor, token, message."""
    return insert(job_events).values(at=now)


def job_by_id() -> Select:
    """One job. Params: j_id."""
    return select(jobs).where(jobs.c.id == bindparam("j_id"))


#: Columns enqueue_jobs_pg takes as arrays: (bind parameter, column, array element type).
ENQUEUE_ARRAYS: tuple[tuple[str, str, Any], ...] = (
    ("ids", "id", String()),
    ("names", "name", String()),
    ("queues", "queue", String()),
    ("statuses", "status", SmallInteger()),
    ("priorities", "priority", BigInteger()),
    ("payloads", "payload", Text()),
    ("headers", "headers", Text()),
    ("route_params", "route_params", Text()),
    ("query_params", "query_params", Text()),
    ("max_retries", "max_retries", BigInteger()),
    ("timeouts", "timeout_seconds", Double()),
    ("lease_ttls", "lease_ttl_seconds", Double()),
    ("idempotency_keys", "idempotency_key", String()),
    ("delays", "delay", Double()),
    ("delay_untils", "delay_until", Double()),
)
#: The JSON columns of ``jobs`` that enqueue_jobs_pg takes as JSON texts.
JSON_COLUMNS = ("payload", "headers", "route_params", "query_params")


def enqueue_jobs_pg(now: ColumnElement[float]) -> Select:
    """PostgreSQL enqueue of a chunk as one statement (autocommit): the jobs
    inserted from ``unnest`` of one array per column (a fixed number of bind
    parameters whatever the chunk size), one ``enqueued`` event per job, the
    counter deltas, and one ``pg_notify`` per queue that got ready jobs
    (delivered at commit; workers LISTEN, see store/sql/wakeups.py). Params:
    the arrays of ENQUEUE_ARRAYS (JSON columns as JSON texts, None for SQL
    NULL; ``delay_untils`` None when not delayed), shard, channel. Returns
    the inserted rows, in no particular order."""
    names = [name for _, name, _ in ENQUEUE_ARRAYS]
    src = (
        func.unnest(*(bindparam(param, type_=postgresql.ARRAY(kind)) for param, _, kind in ENQUEUE_ARRAYS))
        .table_valued(*names)
        .render_derived(name="u")
    )
    columns = [c for c in names if c not in ("delay", "delay_until")]
    values = [cast(src.c[c], postgresql.JSONB) if c in JSON_COLUMNS else src.c[c] for c in columns]
    zero = ("retry_count", "lease_expirations", "lease_token")
    times = ("created_at", "last_updated_at", "due_at", "retry_delay_until")
    ins = (
        insert(jobs)
        .from_select(
            [*columns, *zero, *times],
            select(
                *values, *(literal(0) for _ in zero), now, now, now + src.c.delay, now + src.c.delay_until
            ).select_from(src),
        )
        .returning(*jobs.c)
        .cte("ins")
    )
    events = insert(job_events).from_select(
        ["job_id", "at", "kind", "to_status", "token"],
        select(ins.c.id, now, literal("enqueued"), ins.c.status, literal(0)),
    )
    bump = _add_to_counters(
        select(func.concat("s:", ins.c.status, ":", ins.c.queue).label("key"), literal(1).label("d")),
        select(literal("e:enqueued"), literal(1)).select_from(ins),
    )
    ready = select(ins.c.queue).where(ins.c.status == int(JobStatus.Queued)).distinct().subquery("ready")
    notified = select(func.count(func.pg_notify(bindparam("channel", type_=Text()), ready.c.queue)))
    return select(ins, notified.scalar_subquery().label("notified")).add_cte(
        events.cte("ev"), bump.cte("cnt")
    )


def job_by_idempotency_key() -> Select:
    """The job enqueued with a key. Params: key."""
    return select(jobs).where(jobs.c.idempotency_key == bindparam("key"))


def lock_job_for_update() -> Select:
    """Lock one job row for a read-decide-write change. Params: j_id."""
    return select(jobs).where(jobs.c.id == bindparam("j_id")).with_for_update()


def claim_pg(now: ColumnElement[float], queues: int) -> Update:
    """PostgreSQL claim: pick due jobs with FOR UPDATE SKIP LOCKED and lease
    them in one statement. Params: q0..qN, limit, worker_id, ttl."""
    picked = (
        _due(select(jobs.c.id, jobs.c.status.label("old_status")), now, queues)
        .with_for_update(skip_locked=True)
        .subquery("picked")
    )
    return _lease(update(jobs), now).where(jobs.c.id == picked.c.id).returning(*jobs.c, picked.c.old_status)


def _add_to_counters(*deltas: Select) -> Insert:
    """PostgreSQL: an upsert adding ``(key, d)`` rows, summed per key, to this
    process's shard of the counters (bind parameter ``shard``), in key order:
    a fixed lock order on counter rows, so concurrent statements never deadlock."""
    rows = union_all(*deltas).subquery("deltas")
    totals = (
        select(rows.c.key, bindparam("shard", type_=SmallInteger()), func.sum(rows.c.d))
        .group_by(rows.c.key)
        .order_by(rows.c.key)
    )
    bump = postgresql.insert(counters).from_select(["key", "shard", "n"], totals)
    return bump.on_conflict_do_update(
        index_elements=[counters.c.key, counters.c.shard], set_={"n": counters.c.n + bump.excluded.n}
    )


def with_bookkeeping(
    change: Update, now: ColumnElement[float], kind: str, *, by_actor: bool = False, ids_only: bool = False
) -> Select:
    """PostgreSQL: one statement that applies ``change`` (an UPDATE returning
    the jobs columns and ``old_status``), appends one ``kind`` event per
    changed job and adds the status and event deltas to the counters, so a
    hot-path change is a single atomic round trip (autocommit). The event's
    actor is the job's worker_id, or with ``by_actor`` the bind parameter
    ``actor`` and its message the column ``message`` that ``change`` returns.
    Params: ``shard`` plus those of ``change``. Returns the changed rows, or
    with ``ids_only`` just their (id, lease_token): nothing to decode when the
    caller needs no job back (a worker's acks, recovery)."""
    upd = change.cte("upd")
    actor = bindparam("actor", type_=String()) if by_actor else upd.c.worker_id
    message = upd.c.message if by_actor else null()
    events = insert(job_events).from_select(
        ["job_id", "at", "kind", "from_status", "to_status", "actor", "token", "message"],
        select(
            upd.c.id, now, literal(kind), upd.c.old_status, upd.c.status, actor, upd.c.lease_token, message
        ),
    )
    bump = _add_to_counters(
        select(func.concat("s:", upd.c.old_status, ":", upd.c.queue).label("key"), literal(-1).label("d")),
        select(func.concat("s:", upd.c.status, ":", upd.c.queue), literal(1)),
        select(literal(f"e:{kind}"), literal(1)).select_from(upd),
    )
    out = select(upd.c.id, upd.c.lease_token) if ids_only else select(upd)
    return out.add_cte(events.cte("ev"), bump.cte("cnt"))


def _due(stmt: Select, now: ColumnElement[float], queues: int) -> Select:
    """Due jobs of the named queues in claim order, written so the planner walks
    ix_jobs_ready in order and stops at LIMIT: the status codes are literals
    (implying the partial index's predicate) and one queue is an equality."""
    waiting = jobs.c.status.in_([literal_column(str(code)) for code in source_codes(Operation.CLAIM)])
    if queues == 1:
        in_queue = jobs.c.queue == bindparam("q0")
    else:
        in_queue = jobs.c.queue.in_([bindparam(f"q{i}") for i in range(queues)])
    return (
        stmt.where(waiting, in_queue, jobs.c.due_at <= now)
        .order_by(jobs.c.priority.desc(), jobs.c.due_at, jobs.c.id)
        .limit(bindparam("limit"))
    )


def claim_candidates_sqlite(now: ColumnElement[float], queues: int) -> Select:
    """SQLite claim, step 1 (inside BEGIN IMMEDIATE): due jobs. Params: q0..qN, limit."""
    return _due(select(jobs.c.id, jobs.c.status), now, queues)


def claim_sqlite(now: ColumnElement[float]) -> Update:
    """SQLite claim, step 2: lease the picked ids. Params: ids (expanding), worker_id, ttl."""
    return (
        _lease(update(jobs), now)
        .where(
            jobs.c.id.in_(bindparam("ids", expanding=True)),
            jobs.c.status.in_(source_codes(Operation.CLAIM)),
        )
        .returning(*jobs.c)
    )


def _lease(stmt: Update, now: ColumnElement[float]) -> Update:
    ttl = func.coalesce(jobs.c.lease_ttl_seconds, bindparam("ttl", type_=Double()))
    return stmt.values(
        status=IN_PROGRESS,
        worker_id=bindparam("worker_id"),
        lease_token=jobs.c.lease_token + 1,
        lease_expires_at=now + ttl,
        last_heartbeat_at=now,
        started_at=now,
        last_updated_at=now,
        retry_delay_until=None,
    )


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
    """Ack guarded by status and token. Params: j_id, token, new_result."""
    return (
        update(jobs)
        .where(
            jobs.c.id == bindparam("j_id"),
            jobs.c.status.in_(source_codes(Operation.COMPLETE)),
            jobs.c.lease_token == bindparam("token"),
        )
        .values(
            status=int(JobStatus.Completed),
            result=bindparam("new_result"),
            completed_at=now,
            last_updated_at=now,
            lease_expires_at=None,
        )
        .returning(*jobs.c)
    )


def complete_jobs_pg(now: ColumnElement[float]) -> Update:
    """PostgreSQL batch ack: one UPDATE over ``unnest`` of three arrays, each row
    guarded by status and token. Params: ids, tokens, results (JSON texts)."""
    acks = (
        func.unnest(
            bindparam("ids", type_=postgresql.ARRAY(String())),
            bindparam("tokens", type_=postgresql.ARRAY(BigInteger())),
            bindparam("results", type_=postgresql.ARRAY(Text())),
        )
        .table_valued("a_id", "a_token", "a_result")
        .render_derived(name="acks")
    )
    return (
        update(jobs)
        .where(
            jobs.c.id == acks.c.a_id,
            jobs.c.lease_token == acks.c.a_token,
            jobs.c.status.in_(source_codes(Operation.COMPLETE)),
        )
        .values(
            status=int(JobStatus.Completed),
            result=cast(acks.c.a_result, postgresql.JSONB),
            completed_at=now,
            last_updated_at=now,
            lease_expires_at=None,
        )
        .returning(*jobs.c, literal(IN_PROGRESS, SmallInteger()).label("old_status"))
    )


def apply_failure(now: ColumnElement[float], expired_only: bool = False) -> Update:
    """Apply a retry decision guarded by status and token (and, for recovery,
    by the lease still being expired). Params: j_id, token, new_status,
    new_retry_count, delay (seconds or None), new_error, expired (0 or 1 added to
    lease_expirations)."""
    delay = bindparam("delay", type_=Double())
    guard = [
        jobs.c.id == bindparam("j_id"),
        jobs.c.status.in_(source_codes(Operation.FAIL)),
        jobs.c.lease_token == bindparam("token"),
    ]
    if expired_only:
        guard.append(jobs.c.lease_expires_at < now)
    due = func.coalesce(now + delay, now)
    new_status = bindparam("new_status", type_=SmallInteger())
    return (
        update(jobs)
        .where(*guard)
        .values(
            status=new_status,
            retry_count=bindparam("new_retry_count"),
            lease_expirations=jobs.c.lease_expirations + bindparam("expired"),
            error=bindparam("new_error"),
            retry_delay_until=now + delay,
            due_at=due,
            lease_expires_at=None,
            completed_at=case((new_status == int(JobStatus.Failed), now), else_=None),
            last_updated_at=now,
        )
        .returning(*jobs.c)
    )


def recover_jobs_pg(now: ColumnElement[float]) -> Update:
    """PostgreSQL recovery of a batch: one UPDATE over ``unnest`` of the retry
    decisions, each row guarded by status InProgress, its token and its lease
    still expired (so a lease renewed or a job recovered meanwhile is left
    alone). Params: ids, tokens, new_statuses, new_retry_counts, delays
    (seconds, None when Failed), errors (JSON texts), messages (event
    messages). Returns the changed rows with ``old_status`` and ``message``;
    wrap it in ``with_bookkeeping(..., by_actor=True)``."""
    f = (
        func.unnest(
            bindparam("ids", type_=postgresql.ARRAY(String())),
            bindparam("tokens", type_=postgresql.ARRAY(BigInteger())),
            bindparam("new_statuses", type_=postgresql.ARRAY(SmallInteger())),
            bindparam("new_retry_counts", type_=postgresql.ARRAY(BigInteger())),
            bindparam("delays", type_=postgresql.ARRAY(Double())),
            bindparam("errors", type_=postgresql.ARRAY(Text())),
            bindparam("messages", type_=postgresql.ARRAY(Text())),
        )
        .table_valued("f_id", "f_token", "f_status", "f_retries", "f_delay", "f_error", "f_message")
        .render_derived(name="f")
    )
    return (
        update(jobs)
        .where(
            jobs.c.id == f.c.f_id,
            jobs.c.lease_token == f.c.f_token,
            jobs.c.status.in_(source_codes(Operation.FAIL)),
            jobs.c.lease_expires_at < now,
        )
        .values(
            status=f.c.f_status,
            retry_count=f.c.f_retries,
            lease_expirations=jobs.c.lease_expirations + 1,
            error=cast(f.c.f_error, postgresql.JSONB),
            retry_delay_until=now + f.c.f_delay,
            due_at=func.coalesce(now + f.c.f_delay, now),
            lease_expires_at=None,
            completed_at=case((f.c.f_status == int(JobStatus.Failed), now), else_=None),
            last_updated_at=now,
        )
        .returning(
            *jobs.c, literal(IN_PROGRESS, SmallInteger()).label("old_status"), f.c.f_message.label("message")
        )
    )


def release_job(now: ColumnElement[float]) -> Update:
    """Give a lease back: InProgress -> Scheduled due now. Params: j_id, token."""
    return (
        update(jobs)
        .where(
            jobs.c.id == bindparam("j_id"),
            jobs.c.status.in_(source_codes(Operation.RELEASE)),
            jobs.c.lease_token == bindparam("token"),
        )
        .values(
            status=int(JobStatus.Scheduled),
            due_at=now,
            retry_delay_until=now,
            worker_id=None,
            lease_expires_at=None,
            last_updated_at=now,
        )
        .returning(*jobs.c)
    )


def operator_change(now: ColumnElement[float], values: dict[str, object]) -> Update:
    """Operator transition guarded by the status read under lock. Params: j_id,
    old_status, plus any bind parameters in ``values``."""
    return (
        update(jobs)
        .where(jobs.c.id == bindparam("j_id"), jobs.c.status == bindparam("old_status"))
        .values(last_updated_at=now, **values)
        .returning(*jobs.c)
    )


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
        )
        .where(jobs.c.status == IN_PROGRESS, jobs.c.lease_expires_at < now)
        .order_by(jobs.c.lease_expires_at)
        .limit(bindparam("limit"))
    )
    return stmt.with_for_update(skip_locked=True) if lock else stmt


#: Planner settings ``walk_indexes_pg`` turns off for one statement.
PLANNER_OFF = ("enable_sort", "enable_bitmapscan")


def walk_indexes_pg() -> Select:
    """PostgreSQL, until ``planner_settings_pg`` restores them: plan without
    sorts and bitmap scans (``set_config(..., true)`` is ``SET LOCAL``), so
    ``expired_leases`` walks ix_jobs_lease in order and stops at its LIMIT.
    After a mass expiry (a crash of many workers) the table's statistics are
    stale, and the planner otherwise reads and sorts every expired row to
    return the oldest 500 (EXPLAIN: 47 ms and a disk sort at 100,000 leases).
    No params. Returns the settings as they were, for planner_settings_pg."""
    was = [func.current_setting(name).label(name) for name in PLANNER_OFF]
    return select(*was, *(func.set_config(name, "off", True) for name in PLANNER_OFF))


def planner_settings_pg() -> Select:
    """PostgreSQL: put back what walk_indexes_pg turned off. Params: the
    names of PLANNER_OFF, each with its value as walk_indexes_pg returned it."""
    return select(*(func.set_config(name, bindparam(name, type_=Text()), True) for name in PLANNER_OFF))


def count_expired(now: ColumnElement[float]) -> Select:
    """How many leases have expired (index range on ix_jobs_lease). No params."""
    return select(func.count()).where(jobs.c.status == IN_PROGRESS, jobs.c.lease_expires_at < now)


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


def operator_events() -> Select:
    """Operator actions, newest first (partial index ix_job_events_audit). Params: limit."""
    return (
        select(job_events)
        .where(job_events.c.actor.like("operator:%"))
        .order_by(job_events.c.id.desc())
        .limit(bindparam("limit"))
    )


def upsert_counters(dialect: str) -> Insert:
    """Add to sharded counters (executemany). Params: key, shard, n."""
    ins = postgresql.insert(counters) if dialect == "postgresql" else sqlite.insert(counters)
    return ins.on_conflict_do_update(
        index_elements=[counters.c.key, counters.c.shard],
        set_={"n": counters.c.n + ins.excluded.n},
    )


def sum_counters() -> Select:
    """Every counter summed over its shards. No params."""
    return select(counters.c.key, func.sum(counters.c.n)).group_by(counters.c.key)


def acquire_lock(dialect: str, now: ColumnElement[float]) -> Insert:
    """Take the lock if free, expired or ours. Params: name, owner, ttl.
    Returns the owner when taken."""
    ins = postgresql.insert(locks) if dialect == "postgresql" else sqlite.insert(locks)
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


def upsert_worker(dialect: str, now: ColumnElement[float]) -> Insert:
    """Register or refresh a worker. Params: id, host, pid, queues, concurrency,
    jobs_in_hand, started_at."""
    ins = postgresql.insert(workers) if dialect == "postgresql" else sqlite.insert(workers)
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


def recent_recovery_runs() -> Select:
    """Recovery history, newest first. Params: limit."""
    return select(recovery_runs).order_by(recovery_runs.c.started_at.desc()).limit(bindparam("limit"))


def purge_candidates(now: ColumnElement[float]) -> Select:
    """Finished jobs last updated before ``now - age``. Params: age, limit."""
    return (
        select(jobs.c.id, jobs.c.status, jobs.c.queue)
        .where(jobs.c.status.in_(FINISHED), jobs.c.last_updated_at < now - bindparam("age", type_=Double()))
        .order_by(jobs.c.status, jobs.c.last_updated_at)
        .limit(bindparam("limit"))
    )


def delete_jobs() -> Delete:
    """Delete jobs by id. Params: ids (expanding)."""
    return delete(jobs).where(jobs.c.id.in_(bindparam("ids", expanding=True)))


def delete_events_of() -> Delete:
    """Delete the events of jobs. Params: ids (expanding)."""
    return delete(job_events).where(job_events.c.job_id.in_(bindparam("ids", expanding=True)))
