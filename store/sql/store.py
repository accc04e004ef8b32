"""The SQL JobStore (SQLite and PostgreSQL) on SQLAlchemy 2.0 Core.

Each public method is one transaction (or one per chunk): the guarded change,
its job events and the counters commit together. The shape mirrors
``store/redis/``: ``plumbing.py`` (transactions, outages, bookkeeping),
``records.py`` (the record port), ``recovery.py``, and where the two
engines differ a ``Dialect`` strategy (``sqlite.py``, ``postgres.py``); every
status change is built from the lifecycle table (``changes.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, bindparam
from sqlalchemy.exc import IntegrityError

from store import lifecycle
from store.base import JobStore, StoreSettings, Wakeups
from store.bookings import Bookings
from store.cursor import decode_cursor, encode_cursor
from store.errors import JobNotFound, ParentUnfinished
from store.ids import new_id
from store.lifecycle import TERMINAL, EventKind, JobStatus, Operation, rule
from store.models import Attempt, Job, JobEvent, JobSpec, Page
from store.parts import assemble, delegate
from store.registry import RegistryRecords
from store.shared import SharedStore
from store.spec import unique_key_of
from store.sql import flow_statements as fs
from store.sql import operating_statements as ops
from store.sql import revision
from store.sql import statements as sql
from store.sql.audit import SqlAuditPart
from store.sql.batch_list import SqlBatchListPart
from store.sql.expiry import SqlExpiryPart
from store.sql.flow import SqlFlowPart
from store.sql.joined import check_joinable, joining
from store.sql.leases import SqlLeasesPart
from store.sql.operating import SqlOperatingPart
from store.sql.plumbing import Dialect, SqlPlumbing, event_row
from store.sql.records import SqlRecordsPart
from store.sql.recovery import SqlRecoveryPart
from store.sql.rows import attempt_from_row, event_from_row, job_from_row
from store.sql.schema import jobs
from store.sql.search import SqlSearchPart


class SqlStore(SqlPlumbing, JobStore):
    """JobStore on SQLite or PostgreSQL. ``url`` is a SQLAlchemy URL."""

    # ------------------------------------------------ parts (store/parts.py)
    #: The part objects an engine is made of, by name (each a class of one module).
    parts = {
        "shared": SharedStore,
        "registry": RegistryRecords,
        "bookings": Bookings,
        "flow": SqlFlowPart,
        "batch_list": SqlBatchListPart,
        "audit": SqlAuditPart,
        "operating": SqlOperatingPart,
        "recovery": SqlRecoveryPart,
        "expiry": SqlExpiryPart,
        "records": SqlRecordsPart,
        "search": SqlSearchPart,
        "leases": SqlLeasesPart,
    }

    # shared: SharedStore
    _changed = delegate("shared")
    _enqueue_one = delegate("shared")
    _handler_policies = delegate("shared")
    _recovery_limit = delegate("shared")
    _search_by_id = delegate("shared")
    cancel = delegate("shared")
    command_worker = delegate("shared")
    complete_many = delegate("shared")
    count_jobs = delegate("shared")
    count_purgeable = delegate("shared")
    counts = delegate("shared")
    delete = delegate("shared")
    enqueue = delegate("shared")
    enqueue_chunk = delegate("shared")
    enqueue_idempotent = delegate("shared")
    enqueue_many = delegate("shared")
    event_counts = delegate("shared")
    expired_lease_count = delegate("shared")
    list_jobs = delegate("shared")
    pause_queue = delegate("shared")
    preview_recovery = delegate("shared")
    purge = delegate("shared")
    queue_event_counts = delegate("shared")
    record_action = delegate("shared")
    record_audit = delegate("shared")
    recover_expired = delegate("shared")
    report_progress_many = delegate("shared")
    requeue = delegate("shared")
    resume_queue = delegate("shared")
    retry_now = delegate("shared")
    search_jobs = delegate("shared")
    # registry: RegistryRecords
    _append_run = delegate("registry")
    _command_worker = delegate("registry")
    _runs = delegate("registry")
    acquire_lock = delegate("registry")
    lock_info = delegate("registry")
    maintenance_runs = delegate("registry")
    prune_workers = delegate("registry")
    record_maintenance_run = delegate("registry")
    record_recovery_run = delegate("registry")
    recovery_runs = delegate("registry")
    release_lock = delegate("registry")
    remove_worker = delegate("registry")
    worker_heartbeat = delegate("registry")
    workers = delegate("registry")
    # bookings: Bookings
    clear_failures = delegate("bookings")
    failure_count = delegate("bookings")
    get_operation = delegate("bookings")
    operations = delegate("bookings")
    prune_failures = delegate("bookings")
    record_failure = delegate("bookings")
    record_tick = delegate("bookings")
    save_operation = delegate("bookings")
    save_schedules = delegate("bookings")
    schedules = delegate("bookings")
    set_schedule_enabled = delegate("bookings")
    # flow: SqlFlowPart
    _apply_new = delegate("flow")
    _batch = delegate("flow")
    _cancel_locked = delegate("flow")
    _claim_limited = delegate("flow")
    _claim_queue = delegate("flow")
    _complete_parents = delegate("flow")
    _decide_new = delegate("flow")
    _enqueue_flow = delegate("flow")
    _flow_init = delegate("flow")
    _flow_row = delegate("flow")
    _insert_flow = delegate("flow")
    _limited_queues = delegate("flow")
    _settle = delegate("flow")
    _usage = delegate("flow")
    batch_jobs = delegate("flow")
    cancel_batch = delegate("flow")
    children = delegate("flow")
    claim_retry_after = delegate("flow")
    create_batch = delegate("flow")
    get_batch = delegate("flow")
    limit_hold = delegate("flow")
    limit_usage = delegate("flow")
    parents = delegate("flow")
    queue_limits = delegate("flow")
    set_queue_limits = delegate("flow")
    supports_flow = delegate("flow")
    # batch_list: SqlBatchListPart
    list_batches = delegate("batch_list")
    # audit: SqlAuditPart
    audit_page = delegate("audit")
    prune_audit = delegate("audit")
    # operating: SqlOperatingPart
    _purge = delegate("operating")
    _record_audit = delegate("operating")
    _roll_up = delegate("operating")
    _set_paused = delegate("operating")
    handler_minutes = delegate("operating")
    history = delegate("operating")
    queue_states = delegate("operating")
    remove_jobs = delegate("operating")
    trim_history = delegate("operating")
    # recovery: SqlRecoveryPart
    _decide = delegate("recovery")
    _recover = delegate("recovery")
    # expiry: SqlExpiryPart
    _expire_due = delegate("expiry")
    # records: SqlRecordsPart
    _change = delegate("records")
    clock = delegate("records")
    held = delegate("records")
    hold = delegate("records")
    record_change = delegate("records")
    record_drop = delegate("records")
    record_get = delegate("records")
    record_page = delegate("records")
    record_prune = delegate("records")
    unhold = delegate("records")
    # search: SqlSearchPart
    _search = delegate("search")
    # leases: SqlLeasesPart
    _complete = delegate("leases")
    _report_progress = delegate("leases")
    claim = delegate("leases")
    claim_notified = delegate("leases")
    fail = delegate("leases")
    heartbeat = delegate("leases")
    release = delegate("leases")

    def make_dialect(self, name: str) -> Dialect:
        """The strategy for an engine name (the one place that names dialects);
        imported here so a PostgreSQL process never loads the SQLite one."""
        if name == "postgresql":
            from store.sql.postgres import PostgresDialect

            return PostgresDialect(self)
        from store.sql.sqlite import SqliteDialect

        return SqliteDialect(self)

    def __init__(
        self,
        url: str,
        settings: StoreSettings | None = None,
        pool_size: int = 5,
        engine: Engine | None = None,
    ) -> None:
        """``engine``: an application's PostgreSQL engine whose pool the store
        uses instead of its own (``engine.engines_on``; close() leaves it open)."""
        assemble(self)
        super().__init__(url, settings, pool_size, engine)
        now = self._now
        self._q_fail = sql.apply_failure(now)
        self._q_renew = sql.renew_leases(now)
        keep = {
            "retry_count": jobs.c.retry_count * bindparam("keep"),
            "lease_expirations": jobs.c.lease_expirations * bindparam("keep"),
        }
        self._q_operator = {
            Operation.CANCEL: sql.operator_change(now, Operation.CANCEL),
            Operation.REQUEUE: sql.operator_change(now, Operation.REQUEUE, keep),
            Operation.RETRY_NOW: sql.operator_change(now, Operation.RETRY_NOW),
        }
        self._q_release = sql.release_job(now)
        self._q_insert_key = ops.insert_unique_key(now)
        self._q_move_key = ops.move_unique_key(now)
        self._flow_init()

    # ------------------------------------------------------------- enqueue
    @contextmanager
    def joined(self, connection: Any) -> Iterator[None]:
        """Within the block, this thread's calls of the store write in the
        open transaction of ``connection`` (a SQLAlchemy Connection of the
        store's database, e.g. ``session.connection()``): they commit or roll
        back with it; each call is a SAVEPOINT of it (store/sql/joined.py).
        Raises ValidationError (field ``session``) for a connection of
        another database or driver, or with no transaction begun."""
        with joining(self, check_joinable(self.url, connection)):
            yield

    def _row_for(self, spec: JobSpec) -> dict[str, Any]:
        s = self.settings
        status = lifecycle.enqueue_target(spec.delay_s)
        return {
            "id": new_id(),
            "name": spec.name,
            "queue": spec.queue,
            "status": int(status),
            "priority": spec.priority,
            "payload": spec.payload,
            "headers": spec.headers,
            "route_params": spec.route_params,
            "query_params": spec.query_params,
            "max_retries": s.max_retries if spec.max_retries is None else spec.max_retries,
            "timeout_seconds": s.job_timeout_s if spec.timeout_s is None else spec.timeout_s,
            "lease_ttl_seconds": spec.lease_ttl_s,
            "idempotency_key": spec.idempotency_key,
            "expires_at": spec.expires_at,
            "delay": spec.delay_s,
            "delay_until": spec.delay_s if status is JobStatus.Scheduled else None,
        }

    def _insert(self, specs: Sequence[JobSpec]) -> tuple[list[Job], str | None]:
        """See SharedStore._insert. One spec: its idempotency key's holder
        read first; a unique key taken or moved in one transaction
        (``_enqueue_unique``). An IntegrityError of a spec with a key (a
        concurrent enqueue won the race) is ``([], "")``."""
        try:
            if len(specs) > 1 and any(spec.uses_flow for spec in specs):  # limit keys: one transaction
                rows = [self._flow_row(spec) for spec in specs]
                return self.tx(lambda conn: self._insert_flow(conn, rows, [])), None
            if len(specs) > 1:
                return self.dialect.insert([self._row_for(spec) for spec in specs]), None
            [spec] = specs
            if spec.idempotency_key is not None:
                found = self.read(sql.job_by_idempotency_key(), {"key": spec.idempotency_key})
                if found:
                    return [], found[0]["id"]
            if spec.uses_flow:
                return [self._enqueue_flow(spec)], None
            key = unique_key_of(spec)
            if key is not None:
                return self.tx(lambda conn: self._enqueue_unique(conn, spec, key))
            return self.dialect.insert([self._row_for(spec)]), None
        except IntegrityError:
            if not any(s.idempotency_key is not None or unique_key_of(s) for s in specs):
                raise
            return [], ""

    def _enqueue_unique(self, conn: Connection, spec: JobSpec, key: str) -> tuple[list[Job], str | None]:
        """In one transaction: the key's holder's id if it still holds it (an
        active job, or one younger than its unique_for), else a new job that
        takes the key (a free key is INSERTed, so racing takers collide)."""
        holder = conn.execute(ops.unique_holder(), {"key": key}).mappings().first()
        if holder is not None and holder["status"] is not None:
            held = (
                JobStatus(holder["status"]) not in TERMINAL
                or holder["expires_at"] > conn.execute(self._q_now).scalar_one()
            )
            if held:
                return [], str(holder["job_id"])
        [job] = self.dialect.insert_in(conn, [self._row_for(spec)])
        params = {"u_key": key, "u_job": job.id, "unique_for": spec.unique_for or 0.0}
        conn.execute(self._q_move_key if holder is not None else self._q_insert_key, params)
        return [job], None

    # ------------------------------------------------------------ schema
    def schema_revision(self) -> tuple[str | None, str]:
        return revision.schema_revision(self.read_engine)

    # ---------------------------------------------------------------- read
    def get(self, job_id: str) -> Job:
        rows = self.read(sql.job_by_id(), {"j_id": job_id})
        if not rows:
            raise JobNotFound(job_id)
        return job_from_row(rows[0])

    def _list(
        self,
        status: JobStatus | None,
        queue: str | None,
        name: str | None,
        limit: int,
        cursor: str | None,
        ascending: bool,
    ) -> Page:
        filters = []
        if status is not None:
            filters.append(jobs.c.status == int(status))
        if queue is not None:
            filters.append(jobs.c.queue == queue)
        if name is not None:
            filters.append(jobs.c.name == name)
        params: dict[str, Any] = {"limit": limit + 1}
        if cursor:
            params["c_at"], params["c_id"] = decode_cursor(cursor)
        rows = self.read(sql.list_jobs(filters, bool(cursor), ascending=ascending), params)
        items = [job_from_row(r) for r in rows[:limit]]
        last = rows[limit - 1] if len(rows) > limit else None
        first = encode_cursor(rows[0]["last_updated_at"], rows[0]["id"]) if cursor and rows else None
        return Page(items, encode_cursor(last["last_updated_at"], last["id"]) if last else None, first)

    def _count_named(self, status: JobStatus, queue: str | None, name: str) -> int:
        params = {"status": int(status), "name": name, "queue": queue}
        return int(self.read(sql.count_named(queue is not None), params)[0]["n"])

    def _counter_rows(self) -> Iterable[tuple[str, int]]:
        return self.tx(lambda c: c.execute(sql.sum_counters()).all(), write=False)

    def events(self, job_id: str, limit: int = 200) -> list[JobEvent]:
        rows = self.read(sql.job_events_of(), {"job_id": job_id, "limit": limit})
        return [event_from_row(r) for r in reversed(rows)]

    def attempts(self, job_id: str) -> list[Attempt]:
        return [attempt_from_row(r) for r in self.read(ops.attempts_of(), {"job_id": job_id})]

    # ------------------------------------------------------------ operator
    def _operator_change(self, job_id: str, op: Operation, actor: str, *, reset_retries: bool) -> Job | None:
        """One transaction: the row locked, ``op`` checked with the lifecycle,
        the UPDATE built from its row (``changes.py``), or for DELETE the
        job removed (``remove_jobs``); its event and counters."""
        kind = rule(op).event
        assert kind is not None
        extra = {"keep": 0 if reset_retries else 1} if op is Operation.REQUEUE else {}

        def body(conn: Connection) -> Job | None:
            row = conn.execute(sql.lock_job_for_update(), {"j_id": job_id}).mappings().first()
            if row is None:
                raise JobNotFound(job_id)
            old = JobStatus(row["status"])
            lifecycle.check_operation(job_id, op, old)
            if op in lifecycle.AWAIT_PARENTS and row["pending_parents"] is not None:
                parents = conn.execute(fs.parents_of(), {"j_id": job_id}).mappings()
                waits = lifecycle.unfinished_parent((p["id"], JobStatus(p["status"])) for p in parents)
                if waits is not None:
                    raise ParentUnfinished(job_id, old.name, op.value, waits[0], waits[1].name)
            if op is Operation.DELETE:
                return self._delete(conn, row, kind, actor)
            params = {"j_id": job_id, "old_status": int(old), **extra}
            job = job_from_row(conn.execute(self._q_operator[op], params).mappings().one())
            event = event_row(
                job_id, kind, int(old), int(job.status), actor, row["lease_token"], queue=job.queue
            )
            self.book(conn, [event])
            if row["has_children"] and job.status is JobStatus.Canceled:
                self._settle(conn, [(job_id, JobStatus.Canceled)], actor)
            return job

        return self.tx(body)

    def _delete(self, conn: Connection, row: Any, kind: EventKind, actor: str) -> None:
        """DELETE of the locked ``row`` (its sources checked): a parent's
        waiting children canceled, the job removed, its event (``kind``)
        kept in the audit log when an operator deleted it, else only counted."""
        job_id, old = row["id"], int(row["status"])
        if row["has_children"] and JobStatus(old) not in TERMINAL:
            self._settle(conn, [(job_id, JobStatus.Canceled)], actor)
        self.remove_jobs(conn, [(job_id, old, row["queue"])])
        if actor.startswith(sql.OPERATOR_PREFIX):  # kept in the audit log, which outlives the job
            self.book(conn, [event_row(job_id, kind, old, None, actor, row["lease_token"])])
        else:  # counted only, like Redis: no event row of a job that is gone
            self.book(conn, [event_row(job_id, kind, old, None, actor, None, logged=False)])

    def wakeups(
        self, queues: Sequence[str], worker_id: str | None = None, lease_ttl_s: float | None = None
    ) -> Wakeups | None:
        """PostgreSQL: LISTEN for enqueue notices; SQLite: None, workers poll.
        No hand-over: ``worker_id`` and ``lease_ttl_s`` are not used."""
        return self.dialect.wakeups(queues)
