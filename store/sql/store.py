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
from store.base import MAX_BATCH, JobStore, Notice, StoreSettings, Wakeups
from store.bookings import Bookings
from store.cursor import decode_cursor, encode_cursor
from store.errors import JobNotFound, LeaseLost, ParentUnfinished, ValidationError
from store.ids import new_id
from store.lifecycle import TERMINAL, EventKind, JobStatus, Operation, rule
from store.models import Attempt, HeartbeatResult, Job, JobEvent, JobSpec, Lease, Page, ts
from store.parts import assemble, delegate
from store.registry import RegistryRecords
from store.shared import CheckedProgress, EncodedAck, SharedStore
from store.spec import clean_error, unique_key_of
from store.sql import flow_statements as fs
from store.sql import operating_statements as ops
from store.sql import statements as sql
from store.sql.audit import SqlAuditPart
from store.sql.batch_list import SqlBatchListPart
from store.sql.expiry import SqlExpiryPart
from store.sql.flow import SqlFlowPart
from store.sql.joined import check_joinable, joining
from store.sql.operating import SqlOperatingPart
from store.sql.plumbing import Dialect, Refused, SqlPlumbing, event_row
from store.sql.records import SqlRecordsPart
from store.sql.recovery import SqlRecoveryPart
from store.sql.rows import attempt_from_row, event_from_row, job_from_row
from store.sql.schema import jobs
from store.sql.search import SqlSearchPart

S = JobStatus


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
    }

    # shared: SharedStore
    _changed = delegate("shared")
    _enqueue_one = delegate("shared")
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
            "delay_until": spec.delay_s if status is S.Scheduled else None,
        }

    def _insert(self, specs: Sequence[JobSpec]) -> tuple[list[Job], str | None]:
        """See SharedStore._insert. One spec: its idempotency key's holder
        read first; a unique key taken or moved in one transaction
        (``_enqueue_unique``). An IntegrityError of a spec with a key (a
        concurrent enqueue won the race) is ``([], "")``."""
        try:
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
                S(holder["status"]) not in TERMINAL
                or holder["expires_at"] > conn.execute(self._q_now).scalar_one()
            )
            if held:
                return [], str(holder["job_id"])
        [job] = self.dialect.insert_in(conn, [self._row_for(spec)])
        params = {"u_key": key, "u_job": job.id, "unique_for": spec.unique_for or 0.0}
        conn.execute(self._q_move_key if holder is not None else self._q_insert_key, params)
        return [job], None

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

    # -------------------------------------------------------------- worker
    def claim(
        self, worker_id: str, queues: Sequence[str], limit: int = 1, lease_ttl_s: float | None = None
    ) -> list[Job]:
        if not queues:
            raise ValidationError("queues", "name at least one queue")
        if limit < 1:
            return []
        params: dict[str, Any] = {f"q{i}": q for i, q in enumerate(queues)}
        params.update(
            limit=min(limit, MAX_BATCH), worker_id=worker_id, ttl=lease_ttl_s or self.settings.lease_ttl_s
        )
        rows = self.dialect.claim(params, len(queues))
        if len(rows) < params["limit"]:  # limited queues are claimed apart (store/sql/flow.py)
            rows = [*rows, *self._claim_limited(params, queues, params["limit"] - len(rows))]
        if len(rows) < params["limit"]:  # short: the expired due jobs are decided (store/sql/expiry.py)
            self._expire_due(queues, worker_id)
        # RETURNING order is unspecified: hand jobs out in claim order.
        rows = sorted(rows, key=lambda r: (-r["priority"], r["due_at"], r["id"]))
        return [job_from_row(r) for r in rows]

    def claim_notified(self, worker_id: str, notice: Notice, lease_ttl_s: float | None = None) -> list[Job]:
        """See JobStore.claim_notified: ``notice.job`` is the job's id
        (PostgreSQL's JOB_CHANNEL, store/sql/wakeups.py), leased alone by the
        claim's statement restricted to it ([] when another worker took it or
        its queue is paused); a queue with limits is claimed as ``claim``
        claims it, one job, the next its limits admit (the statement by id
        leaves limited queues out: ``statements.due``)."""
        if not notice.job:
            return []
        if notice.queue in self._limited_queues():
            return self.claim(worker_id, [notice.queue], 1, lease_ttl_s)
        params = {
            "q0": notice.queue,
            "job": notice.job,
            "limit": 1,
            "worker_id": worker_id,
            "ttl": lease_ttl_s or self.settings.lease_ttl_s,
        }
        return [job_from_row(r) for r in self.dialect.claim(params, 1)]

    def heartbeat(
        self, worker_id: str, leases: Sequence[Lease], lease_ttl_s: float | None = None
    ) -> HeartbeatResult:
        """See JobStore.heartbeat. PostgreSQL skips job rows another
        transaction holds and reports them ``deferred`` when still valid."""
        if not leases:
            return HeartbeatResult([], [])
        pairs = [(lease.job_id, lease.token) for lease in leases]
        ttl = lease_ttl_s or self.settings.lease_ttl_s

        def body(conn: Connection) -> HeartbeatResult:
            rows = conn.execute(self._q_renew, {"pairs": pairs, "ttl": ttl}).all()
            renewed = [Lease(r[0], r[1], ts(r[2])) for r in rows]
            done = {(r[0], r[1]) for r in rows}
            missed = [lease for lease in leases if (lease.job_id, lease.token) not in done]
            live = self.dialect.live(conn, missed) if missed else set()
            deferred = [lease for lease in missed if lease.job_id in live]
            refused = [lease for lease in missed if lease.job_id not in live]
            self.refuse(conn, refused, lifecycle.EventKind.HEARTBEAT_REFUSED, worker_id)
            return HeartbeatResult(renewed, refused, deferred)

        return self.tx(body)

    def _complete(
        self, acks: Sequence[EncodedAck], worker_id: str | None, return_jobs: bool
    ) -> list[Job | LeaseLost | None]:
        done = self.dialect.complete(acks, worker_id, return_jobs)
        kind = rule(Operation.COMPLETE).refusal
        assert kind is not None
        left = [a for a in acks if (a[0], a[1]) not in done]

        def rest(conn: Connection) -> dict[tuple[str, int], LeaseLost]:
            # Jobs others wait for are completed here, their children released
            # in the same transaction; what is still left was refused.
            parents = self._complete_parents(conn, left, worker_id)
            done.update({k: v if return_jobs else None for k, v in parents.items()})
            refused = [Lease(a[0], a[1]) for a in left if (a[0], a[1]) not in parents]
            return self.refuse(conn, refused, kind, worker_id) if refused else {}

        lost = self.tx(rest) if left else {}
        return [done[key] if (key := (a[0], a[1])) in done else lost[key] for a in acks]

    def _report_progress(
        self, reports: Sequence[CheckedProgress], worker_id: str | None
    ) -> list[LeaseLost | None]:
        """The writes as one atomic unit (``Dialect.set_progress``), then the
        refusals recorded in a transaction of their own when there are any."""
        written = self.dialect.set_progress(reports)
        refused = [Lease(r[0], r[1]) for r in reports if (r[0], r[1]) not in written]
        lost = (
            self.tx(lambda c: self.refuse(c, refused, EventKind.PROGRESS_REFUSED, worker_id))
            if refused
            else {}
        )
        return [None if (key := (r[0], r[1])) in written else lost[key] for r in reports]

    def attempts(self, job_id: str) -> list[Attempt]:
        return [attempt_from_row(r) for r in self.read(ops.attempts_of(), {"job_id": job_id})]

    def fail(
        self,
        job_id: str,
        token: int,
        error: dict[str, Any],
        *,
        permanent: bool = False,
        worker_id: str | None = None,
        again: lifecycle.RunAgain | None = None,
    ) -> Job:
        refusal = rule(Operation.FAIL).refusal
        assert refusal is not None
        error = clean_error(error)

        def body(conn: Connection) -> Job:
            row = conn.execute(sql.lock_job_for_update(), {"j_id": job_id}).mappings().first()
            if row is None:
                raise JobNotFound(job_id)
            if S(row["status"]) not in lifecycle.sources(Operation.FAIL) or row["lease_token"] != token:
                raise Refused(job_id, token, refusal, worker_id)
            snoozes = 0
            if again is not None and again.snooze:
                found = conn.execute(ops.attempts_of(), {"job_id": job_id}).mappings()
                snoozes = lifecycle.count_snoozes((r["error"] or {}).get("type") for r in found)
            decision = lifecycle.decide_failure(
                row["retry_count"],
                row["max_retries"],
                self.settings.retry,
                permanent=permanent,
                again=again,
                snoozes=snoozes,
            )
            job = self.apply_decision(
                conn, self._q_fail, row, decision, error, expired=False, actor=worker_id
            )
            if job is None:  # pragma: no cover - the row is locked, the guard cannot fail
                raise Refused(job_id, token, refusal, worker_id)
            if row["has_children"] and job.status is S.Failed:
                self._settle(conn, [(job_id, S.Failed)], worker_id)
            return job

        try:
            return self.tx(body)
        except Refused as refused:
            raise self.refusal(refused) from None

    def release(self, job_id: str, token: int, worker_id: str | None = None) -> Job:
        op = rule(Operation.RELEASE)
        assert op.event is not None and op.refusal is not None

        def body(conn: Connection) -> Job:
            found = conn.execute(self._q_release, {"j_id": job_id, "token": token}).mappings().first()
            if found is None:
                raise Refused(job_id, token, op.refusal, worker_id)
            job = job_from_row(found)
            event = event_row(
                job_id, op.event, int(S.InProgress), int(job.status), worker_id, token, queue=job.queue
            )
            self.book(conn, [event])
            return job

        try:
            return self.tx(body)
        except Refused as refused:
            raise self.refusal(refused) from None

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
            old = S(row["status"])
            lifecycle.check_operation(job_id, op, old)
            if op in lifecycle.AWAIT_PARENTS and row["pending_parents"] is not None:
                parents = conn.execute(fs.parents_of(), {"j_id": job_id}).mappings()
                waits = lifecycle.unfinished_parent((p["id"], S(p["status"])) for p in parents)
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
            if row["has_children"] and job.status is S.Canceled:
                self._settle(conn, [(job_id, S.Canceled)], actor)
            return job

        return self.tx(body)

    def _delete(self, conn: Connection, row: Any, kind: EventKind, actor: str) -> None:
        """DELETE of the locked ``row`` (its sources checked): a parent's
        waiting children canceled, the job removed, its event (``kind``)
        kept in the audit log when an operator deleted it, else only counted."""
        job_id, old = row["id"], int(row["status"])
        if row["has_children"] and S(old) not in TERMINAL:
            self._settle(conn, [(job_id, S.Canceled)], actor)
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
