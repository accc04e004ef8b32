"""Named statements only PostgreSQL runs: one-statement enqueue, claim, acks
and recovery whose job events and counters ride along as CTEs, so a hot-path
change is one autocommit round trip; and the planner toggles of recovery.
Same conventions as ``statements.py``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Double,
    Select,
    SmallInteger,
    String,
    Text,
    Update,
    bindparam,
    case,
    cast,
    func,
    insert,
    literal_column,
    select,
    update,
)
from sqlalchemy.dialects import postgresql

from store.counters import HISTORY_KINDS
from store.lifecycle import EventKind, JobStatus, Operation
from store.sql import bookkeeping as bk
from store.sql import handler_minutes as hmin
from store.sql.changes import const, enqueue_values, guarded_update
from store.sql.rows import JSON_COLUMNS, NEW_JOB_TIMES
from store.sql.schema import attempts as attempts_table
from store.sql.schema import counters, jobs
from store.sql.schema import handler_minutes as handler_minutes_table
from store.sql.schema import history as history_table
from store.sql.statements import IN_PROGRESS, due, failure_values, json_with_at, lease

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
    ("expires_ats", "expires_at", Double()),
    ("delays", "delay", Double()),
    ("delay_untils", "delay_until", Double()),
)
#: The parameters of ENQUEUE_ARRAYS whose elements are doubles.
DOUBLE_ARRAYS: tuple[str, ...] = tuple(p for p, _, kind in ENQUEUE_ARRAYS if isinstance(kind, Double))


def enqueue_jobs_pg(now: ColumnElement[float], one: bool = False) -> Select:
    """PostgreSQL enqueue of a chunk as one statement (autocommit): the jobs
    inserted (Operation.ENQUEUE's values: ``changes.enqueue_values``) from
    ``unnest`` of one array per column (a fixed number of bind parameters
    whatever the chunk size), one ``enqueued`` event per job, the
    counter deltas, and one ``pg_notify`` per queue that got ready jobs
    (delivered at commit; workers LISTEN, see store/sql/wakeups.py), its
    payload ``<id>\n<queue>`` when the statement made one job of the queue
    ready, else ``\n<queue>``. Params:
    the arrays of ENQUEUE_ARRAYS (JSON columns as JSON texts, None for SQL
    NULL; ``delay_untils`` None when not delayed), shard, channel (JOB_CHANNEL). With
    ``one``, the same for one job, each parameter a value instead of an array
    (a single enqueue: arrays cost ~40 us of client CPU to adapt). Returns
    each inserted job's id and the times the database set (created_at,
    last_updated_at, due_at, retry_delay_until), in no particular order."""
    names = [name for _, name, _ in ENQUEUE_ARRAYS]
    at: Any = now
    if one:
        # Typed in the SQL: a NULL sent for a double would be taken for text.
        # The clock is read once, as the column ``t`` (the statement stays
        # under psycopg's limit for caching its parsed text, see below).
        values = (
            cast(bindparam(param, type_=kind), kind).label(name) for param, name, kind in ENQUEUE_ARRAYS
        )
        src: Any = select(*values, now.label("t")).subquery("u")
        at = src.c.t
    else:
        arrays = (bindparam(param, type_=postgresql.ARRAY(kind)) for param, _, kind in ENQUEUE_ARRAYS)
        src = func.unnest(*arrays).table_valued(*names).render_derived(name="u")
    columns = [c for c in names if c not in ("delay", "delay_until")]
    values = [cast(src.c[c], postgresql.JSONB) if c in JSON_COLUMNS else src.c[c] for c in columns]
    table = enqueue_values(at, src.c.delay, src.c.delay_until)
    times = NEW_JOB_TIMES
    ins = (
        insert(jobs)
        .from_select([*columns, *table], select(*values, *table.values()).select_from(src))
        # Only what the database decides: the caller has the rest. The
        # statement stays under psycopg's 4,096-character limit for caching
        # its parsed query text (with every column it was 4,806).
        .returning(jobs.c.id, jobs.c.status, jobs.c.queue, *(jobs.c[t] for t in times))
        .cte("ins")
    )
    src = bk.changes_select(
        ins.c.id, ins.c.queue, EventKind.ENQUEUED, None, ins.c.status, None, const(0), None
    )
    queued = ins.c.status == const(int(JobStatus.Queued))
    # '<id>\n<queue>' when the statement made one job of the queue ready, else '\n<queue>'.
    single = case((func.count() == const(1), func.min(ins.c.id)), else_=literal_column("''"))
    payload = (single + literal_column("E'\\n'") + ins.c.queue).label("p")
    ready = select(payload).where(queued).group_by(ins.c.queue).subquery("ready")
    notified = select(func.count(func.pg_notify(bindparam("channel", type_=Text()), ready.c.p)))
    stamps = (ins.c.id, *(ins.c[t] for t in times))
    return select(*stamps, notified.scalar_subquery().label("notified")).add_cte(
        *_bookkeeping(src, now, EventKind.ENQUEUED, new=True)
    )


def claim_pg(now: ColumnElement[float], queues: int, one: bool = False) -> Update:
    """PostgreSQL claim: pick due jobs with FOR UPDATE SKIP LOCKED and lease
    them in one statement. Params: q0..qN, limit, worker_id, ttl; with
    ``one``, also job: only that job (a notice named it). The lease's times
    read the clock once, as the picked rows' column ``t`` (the same
    statement_timestamp(); a shorter text, under psycopg's cache limit)."""
    picked = (
        due(select(jobs.c.id, jobs.c.status.label("old_status"), now.label("t")), now, queues, one=one)
        .with_for_update(skip_locked=True)
        .subquery("picked")
    )
    leased = lease(picked.c.t, [jobs.c.id == picked.c.id], sources=False)
    return leased.returning(*jobs.c, picked.c.old_status)


def _bookkeeping(src: Any, now: ColumnElement[float], kind: EventKind, new: bool = False) -> list[Any]:
    """The bookkeeping of the ``kind`` changes ``src`` (``bookkeeping.changes_select``;
    ``new``: new jobs) as CTEs: events, counters and, for HISTORY_KINDS, the
    history buckets."""
    ctes = [
        bk.record_events(src, now).cte("ev"),
        bk.add_to_counters(postgresql.insert(counters), src, kind, new).cte("cnt"),
    ]
    if kind in HISTORY_KINDS:
        ctes.append(bk.add_to_history(postgresql.insert(history_table), src, now).cte("hist"))
    return ctes


def with_bookkeeping(
    change: Update,
    now: ColumnElement[float],
    kind: EventKind,
    *,
    by_actor: bool = False,
    ids_only: bool = False,
    attempts: bool = False,
    handler_minutes: bool = False,
) -> Select:
    """PostgreSQL: one statement that applies ``change`` (an UPDATE returning
    the jobs columns and ``old_status``) and writes its bookkeeping by the
    statements every SQL change uses (``store/sql/bookkeeping.py``) as CTEs
    over the changed rows: one ``kind`` event per changed job, the status and
    event deltas, the history buckets, so a
    hot-path change is a single atomic round trip (autocommit). The event's
    actor is the job's worker_id, or with ``by_actor`` the bind parameter
    ``actor`` and its message the column ``message`` that ``change`` returns.
    Params: ``shard`` plus those of ``change``. Returns the changed rows, or
    with ``ids_only`` just their (id, lease_token): nothing to decode when the
    caller needs no job back (a worker's acks, recovery). With ``attempts``
    each changed job's failed attempt is recorded too (``change`` returns
    ``attempt_no``: recovery). With ``handler_minutes`` each changed job is
    counted succeeded in its handler's minute bucket with its run-time bin
    (``store/sql/handler_minutes.py``: the ack)."""
    upd = change.cte("upd")
    actor = bindparam("actor", type_=String()) if by_actor else upd.c.worker_id
    message = upd.c.message if by_actor else None
    src = bk.changes_select(
        upd.c.id,
        upd.c.queue,
        kind,
        upd.c.old_status,
        upd.c.status,
        actor,
        upd.c.lease_token,
        message,
    )
    out = select(upd.c.id, upd.c.lease_token) if ids_only else select(upd)
    ctes = _bookkeeping(src, now, kind)
    if attempts:
        failed = insert(attempts_table).from_select(
            ["job_id", "attempt", "token", "worker_id", "error", "started_at", "finished_at"],
            select(
                upd.c.id,
                upd.c.attempt_no,
                upd.c.lease_token,
                upd.c.worker_id,
                upd.c.error,
                upd.c.started_at,
                now,
            ),
        )
        ctes.append(failed.cte("att"))
    if handler_minutes:
        shard = bindparam("shard", type_=SmallInteger())
        ctes.append(hmin.from_completed_pg(postgresql.insert(handler_minutes_table), upd, shard).cte("hmin"))
    return out.add_cte(*ctes)


def _token_rows(texts: str, columns: tuple[str, str, str], name: str) -> Any:
    """The derived table ``name`` (``columns``) of a batch write guarded by
    token: ``unnest`` of the bind arrays ``ids``, ``tokens`` and ``texts``
    (one text per job), one row per (job, token, text)."""
    return (
        func.unnest(
            bindparam("ids", type_=postgresql.ARRAY(String())),
            bindparam("tokens", type_=postgresql.ARRAY(BigInteger())),
            bindparam(texts, type_=postgresql.ARRAY(Text())),
        )
        .table_valued(*columns)
        .render_derived(name=name)
    )


def complete_jobs_pg(now: ColumnElement[float]) -> Update:
    """PostgreSQL batch ack: one UPDATE over ``unnest`` of three arrays, each row
    guarded by status and token; jobs others wait for are left to the ack that
    releases them (``store/sql/flow.py``). Params: ids, tokens, results (JSON texts)."""
    acks = _token_rows("results", ("a_id", "a_token", "a_result"), "acks")
    return guarded_update(
        Operation.COMPLETE,
        now,
        where=[
            jobs.c.id == acks.c.a_id,
            jobs.c.lease_token == acks.c.a_token,
            jobs.c.has_children == const(0),
        ],
        values={"result": cast(acks.c.a_result, postgresql.JSONB)},
    ).returning(*jobs.c, const(IN_PROGRESS, SmallInteger()).label("old_status"))


def set_progress_pg(now: ColumnElement[float]) -> Update:
    """PostgreSQL progress of many running jobs: one UPDATE over ``unnest`` of
    three arrays (autocommit), each row guarded by status InProgress and its
    token, stamped ``at`` = now. Params: ids, tokens, values (JSON texts
    without ``at``, one per job). Returns the (id, lease_token) written."""
    reports = _token_rows("values", ("p_id", "p_token", "p_value"), "reports")
    return (
        update(jobs)
        .where(
            jobs.c.id == reports.c.p_id,
            jobs.c.lease_token == reports.c.p_token,
            jobs.c.status == IN_PROGRESS,
        )
        .values(progress=json_with_at(cast(reports.c.p_value, postgresql.JSONB), now))
        .returning(jobs.c.id, jobs.c.lease_token)
    )


def recover_jobs_pg(now: ColumnElement[float]) -> Update:
    """PostgreSQL recovery of a batch: one UPDATE over ``unnest`` of the retry
    decisions, each row guarded by status InProgress, its token and its lease
    still expired (so a lease renewed or a job recovered meanwhile is left
    alone). Params: ids, tokens, new_statuses, new_retry_counts, delays
    (seconds, None when Failed), errors (JSON texts), messages (event
    messages), attempt_nos (retry_count + 1 each). Returns the changed rows
    with ``old_status``, ``message`` and ``attempt_no``; wrap it in
    ``with_bookkeeping(..., by_actor=True, attempts=True)``."""
    f = (
        func.unnest(
            bindparam("ids", type_=postgresql.ARRAY(String())),
            bindparam("tokens", type_=postgresql.ARRAY(BigInteger())),
            bindparam("new_statuses", type_=postgresql.ARRAY(SmallInteger())),
            bindparam("new_retry_counts", type_=postgresql.ARRAY(BigInteger())),
            bindparam("delays", type_=postgresql.ARRAY(Double())),
            bindparam("errors", type_=postgresql.ARRAY(Text())),
            bindparam("messages", type_=postgresql.ARRAY(Text())),
            bindparam("attempt_nos", type_=postgresql.ARRAY(BigInteger())),
        )
        .table_valued(
            "f_id", "f_token", "f_status", "f_retries", "f_delay", "f_error", "f_message", "f_attempt"
        )
        .render_derived(name="f")
    )
    error = cast(f.c.f_error, postgresql.JSONB)
    return guarded_update(
        Operation.FAIL,
        now,
        where=[jobs.c.id == f.c.f_id, jobs.c.lease_token == f.c.f_token, jobs.c.lease_expires_at < now],
        values=failure_values(now, f.c.f_status, f.c.f_retries, f.c.f_delay, error, 1),
    ).returning(
        *jobs.c,
        const(IN_PROGRESS, SmallInteger()).label("old_status"),
        f.c.f_message.label("message"),
        f.c.f_attempt.label("attempt_no"),
    )


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
