"""The SQL JobStore (SQLite and PostgreSQL) on SQLAlchemy 2.0 Core.

Each public method is one transaction (or one per chunk): the guarded change,
its job events and the counters commit together. PostgreSQL claims with
``FOR UPDATE SKIP LOCKED``; SQLite serialises writers with ``BEGIN IMMEDIATE``.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import orjson
import uuid6
from sqlalchemy import Connection, bindparam
from sqlalchemy.exc import DBAPIError, IntegrityError

from store import lifecycle
from store.base import MAX_BATCH, MAX_PAGE_SIZE, JobStore, StoreSettings
from store.cursor import decode_cursor, encode_cursor
from store.errors import JobNotFound, LeaseLost, StoreUnavailable, ValidationError
from store.lifecycle import JobStatus, Operation
from store.models import (
    Counts,
    HeartbeatResult,
    Job,
    JobEvent,
    JobSpec,
    Lease,
    LockInfo,
    Page,
    RecoveredJob,
    RecoveryReport,
    RecoveryRun,
    WorkerInfo,
    as_spec,
    failure_event,
    refusal_message,
    ts,
    validate_spec,
)
from store.sql import statements as sql
from store.sql.engine import make_engines
from store.sql.rows import event_from_row, job_from_row, run_from_row, worker_from_row
from store.sql.schema import jobs
from store.sql.wakeups import WAKEUP_CHANNEL, PgWakeups

T = TypeVar("T")
S = JobStatus

#: PostgreSQL SQLSTATEs worth retrying the whole transaction for.
_RETRYABLE_PG = {"40P01", "40001"}  # deadlock_detected, serialization_failure
_TX_ATTEMPTS = 4
#: Counter shards; a process writes to one, readers sum them.
_SHARDS = 16


class _Refused(Exception):
    """Internal: a guarded write matched nothing; carries what to record."""

    def __init__(self, job_id: str, token: int, kind: str, actor: str | None) -> None:
        self.job_id, self.token, self.kind, self.actor = job_id, token, kind, actor


class SqlStore(JobStore):
    """JobStore on SQLite or PostgreSQL. ``url`` is a SQLAlchemy URL."""

    def __init__(self, url: str, settings: StoreSettings | None = None, pool_size: int = 5) -> None:
        self.url = url
        self.settings = settings or StoreSettings()
        #: Seconds added to the database clock; tests move time with it.
        self.clock_offset_s = 0.0
        self._write_engine, self._read_engine, self.dialect = make_engines(url, pool_size)
        self._shard = os.getpid() % _SHARDS if self.dialect == "postgresql" else 0
        self._auto_engine = self._write_engine.execution_options(isolation_level="AUTOCOMMIT")
        now = sql.clock(lambda: self.clock_offset_s)
        self._now = now
        self._q_now = sql.select_now(now)
        self._q_insert = sql.insert_jobs(now)
        self._q_enqueue_pg = sql.enqueue_jobs_pg(now)
        self._q_events = sql.insert_events(now)
        self._q_complete = sql.complete_job(now)
        self._q_complete_many = sql.with_bookkeeping(sql.complete_jobs_pg(now), now, "completed")
        self._q_ack_many = sql.with_bookkeeping(sql.complete_jobs_pg(now), now, "completed", ids_only=True)
        self._q_fail = sql.apply_failure(now)
        self._q_recover = sql.apply_failure(now, expired_only=True)
        self._q_recover_pg = sql.with_bookkeeping(
            sql.recover_jobs_pg(now), now, "lease_expired", by_actor=True, ids_only=True
        )
        self._q_release = sql.release_job(now)
        self._q_renew = sql.renew_leases(now)
        self._q_live_leases = sql.live_leases(now)
        self._q_walk_indexes = sql.walk_indexes_pg()
        self._q_planner_settings = sql.planner_settings_pg()
        self._q_claim_sqlite = sql.claim_sqlite(now)
        self._q_claim_pg: dict[int, Any] = {}
        self._q_candidates: dict[int, Any] = {}
        self._q_counters = sql.upsert_counters(self.dialect)
        due_now = {"due_at": now, "retry_delay_until": None, "worker_id": None, "lease_expires_at": None}
        self._q_operator = {
            Operation.CANCEL: sql.operator_change(
                now, {"status": int(S.Canceled), "lease_expires_at": None, "completed_at": now}
            ),
            Operation.REQUEUE: sql.operator_change(
                now,
                {
                    "status": int(S.Queued),
                    "completed_at": None,
                    "retry_count": jobs.c.retry_count * bindparam("keep"),
                    "lease_expirations": jobs.c.lease_expirations * bindparam("keep"),
                    **due_now,
                },
            ),
            Operation.RETRY_NOW: sql.operator_change(
                now, {"status": int(S.Queued), "completed_at": None, **due_now}
            ),
        }

    # ------------------------------------------------------------ plumbing
    def _tx(self, fn: Callable[[Connection], T], write: bool = True, single: bool = False) -> T:
        """Run ``fn`` in one transaction; retry deadlocks, map outages.

        ``single``: ``fn`` runs one statement that is atomic on its own
        (PostgreSQL, see ``statements.with_bookkeeping``); it runs in
        autocommit, saving the BEGIN and COMMIT round trips."""
        if single and self.dialect == "postgresql":
            engine = self._auto_engine
        else:
            engine = self._write_engine if write else self._read_engine
        for attempt in range(_TX_ATTEMPTS):
            try:
                with engine.begin() as conn:
                    return fn(conn)
            except DBAPIError as exc:
                code = getattr(exc.orig, "sqlstate", None)
                if code in _RETRYABLE_PG and attempt + 1 < _TX_ATTEMPTS:
                    time.sleep(0.005 * (attempt + 1))
                    continue
                if isinstance(exc, IntegrityError):
                    raise
                if (
                    exc.connection_invalidated
                    or code is None
                    or code.startswith("08")
                    or "locked" in str(exc)
                ):
                    raise StoreUnavailable(f"SQL store unavailable: {exc.orig}") from exc
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _bump(self, conn: Connection, deltas: Counter[str]) -> None:
        """Add to counters in key order (a fixed lock order avoids deadlocks)."""
        rows = [{"key": k, "shard": self._shard, "n": n} for k, n in sorted(deltas.items()) if n]
        if rows:
            conn.execute(self._q_counters, rows)

    def _events(self, conn: Connection, rows: list[dict[str, Any]], deltas: Counter[str]) -> None:
        if rows:
            conn.execute(self._q_events, rows)
            for row in rows:
                deltas[f"e:{row['kind']}"] += 1

    @staticmethod
    def _event(
        job_id: str,
        kind: str,
        source: int | None,
        target: int | None,
        actor: str | None,
        token: int | None,
        message: str | None = None,
    ) -> dict[str, Any]:
        return {
            "job_id": job_id,
            "kind": kind,
            "from_status": source,
            "to_status": target,
            "actor": actor,
            "token": token,
            "message": message,
        }

    def _record_refusal(self, refused: _Refused) -> LeaseLost:
        """Record a refused stale write as an event and return the error to raise."""

        def body(conn: Connection) -> LeaseLost:
            events: list[dict[str, Any]] = []
            key = (refused.job_id, refused.token)
            lost = self._refuse(conn, [Lease(*key)], refused.kind, refused.actor, events)[key]
            if lost.current_token is None:
                raise JobNotFound(refused.job_id)
            deltas: Counter[str] = Counter()
            self._events(conn, events, deltas)
            self._bump(conn, deltas)
            return lost

        return self._tx(body)

    # --------------------------------------------------------------- clock
    def now(self) -> float:
        return self._tx(lambda conn: conn.execute(self._q_now).scalar_one(), write=False)

    # ------------------------------------------------------------- enqueue
    def _row_for(self, spec: JobSpec) -> dict[str, Any]:
        s = self.settings
        delayed = spec.delay_s > 0
        return {
            "id": str(uuid6.uuid7()),
            "name": spec.name,
            "queue": spec.queue,
            "status": int(S.Scheduled if delayed else S.Queued),
            "priority": spec.priority,
            "payload": spec.payload,
            "headers": spec.headers,
            "route_params": spec.route_params,
            "query_params": spec.query_params,
            "retry_count": 0,
            "max_retries": s.max_retries if spec.max_retries is None else spec.max_retries,
            "lease_expirations": 0,
            "lease_token": 0,
            "timeout_seconds": s.job_timeout_s if spec.timeout_s is None else spec.timeout_s,
            "lease_ttl_seconds": spec.lease_ttl_s,
            "idempotency_key": spec.idempotency_key,
            "delay": spec.delay_s,
            "delay_until": spec.delay_s if delayed else None,
        }

    def _insert(self, conn: Connection, specs: Sequence[JobSpec]) -> list[Job]:
        """SQLite: insert a chunk (executemany), its events and counters, in ``conn``."""
        rows = [self._row_for(spec) for spec in specs]
        created = [job_from_row(r) for r in conn.execute(self._q_insert, rows).mappings()]
        deltas: Counter[str] = Counter()
        events = []
        for job in created:
            deltas[f"s:{int(job.status)}:{job.queue}"] += 1
            events.append(self._event(job.id, "enqueued", None, int(job.status), None, 0))
        self._events(conn, events, deltas)
        self._bump(conn, deltas)
        return created

    def _insert_pg(self, specs: Sequence[JobSpec]) -> list[Job]:
        """PostgreSQL: insert a chunk with its events, counters and wake-up
        notices in one autocommit statement (statements.enqueue_jobs_pg).
        Raises IntegrityError when an idempotency key is taken (nothing written)."""
        rows = [self._row_for(spec) for spec in specs]
        for row in rows:
            for column in sql.JSON_COLUMNS:
                if row[column] is not None:
                    row[column] = orjson.dumps(row[column]).decode()
        params: dict[str, Any] = {p: [r[c] for r in rows] for p, c, _ in sql.ENQUEUE_ARRAYS}
        params.update(shard=self._shard, channel=WAKEUP_CHANNEL)
        result = self._tx(lambda c: c.execute(self._q_enqueue_pg, params).mappings().all(), single=True)
        created = {r["id"]: job_from_row(r) for r in result}
        return [created[r["id"]] for r in rows]

    def _add(self, specs: Sequence[JobSpec]) -> list[Job]:
        """Insert a chunk as one atomic unit (see _insert, _insert_pg)."""
        if self.dialect == "postgresql":
            return self._insert_pg(specs)
        return self._tx(lambda conn: self._insert(conn, specs))

    def enqueue(self, name: str, payload: Any = None, **options: Any) -> Job:
        return self.enqueue_idempotent(JobSpec(name, payload, **options))[0]

    def enqueue_idempotent(self, spec: JobSpec) -> tuple[Job, bool]:
        validate_spec(spec)

        def body() -> tuple[Job, bool]:
            if spec.idempotency_key is not None:
                found = self._tx(
                    lambda c: (
                        c.execute(sql.job_by_idempotency_key(), {"key": spec.idempotency_key})
                        .mappings()
                        .first()
                    ),
                    write=False,
                )
                if found is not None:
                    return job_from_row(found), False
            return self._add([spec])[0], True

        try:
            return body()
        except IntegrityError:
            # A concurrent enqueue with the same key won the race: return its job.
            if spec.idempotency_key is None:
                raise
            return body()

    def enqueue_many(self, specs: Iterable[JobSpec | tuple[Any, ...]]) -> list[Job]:
        checked = [validate_spec(as_spec(item)) for item in specs]
        out: list[Job] = []
        for i in range(0, len(checked), MAX_BATCH):
            chunk = checked[i : i + MAX_BATCH]
            try:
                out.extend(self._add(chunk))
            except IntegrityError:
                raise ValidationError("idempotency_key", "a key in this batch is already used") from None
        return out

    # ---------------------------------------------------------------- read
    def get(self, job_id: str) -> Job:
        row = self._tx(lambda c: c.execute(sql.job_by_id(), {"j_id": job_id}).mappings().first(), write=False)
        if row is None:
            raise JobNotFound(job_id)
        return job_from_row(row)

    def list_jobs(
        self,
        *,
        status: JobStatus | None = None,
        queue: str | None = None,
        name: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        order: str = "desc",
    ) -> Page:
        if order not in ("asc", "desc"):
            raise ValidationError("order", "must be asc or desc")
        if not 1 <= limit <= MAX_PAGE_SIZE:
            raise ValidationError("limit", f"must be within [1, {MAX_PAGE_SIZE}]")
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
        stmt = sql.list_jobs(filters, bool(cursor), ascending=order == "asc")
        rows = self._tx(lambda c: c.execute(stmt, params).mappings().all(), write=False)
        items = [job_from_row(r) for r in rows[:limit]]
        more = len(rows) > limit
        last = rows[limit - 1] if more else None
        return Page(items, encode_cursor(last["last_updated_at"], last["id"]) if last else None)

    def counts(self) -> Counts:
        return Counts.from_counters(self._tx(lambda c: c.execute(sql.sum_counters()).all(), write=False))

    def event_counts(self) -> dict[str, int]:
        """Totals of job events by kind since the store was created (for metrics)."""
        rows = self._tx(lambda c: c.execute(sql.sum_counters()).all(), write=False)
        return {key[2:]: int(n) for key, n in rows if key.startswith("e:")}

    def events(self, job_id: str, limit: int = 200) -> list[JobEvent]:
        params = {"job_id": job_id, "limit": limit}
        rows = self._tx(lambda c: c.execute(sql.job_events_of(), params).mappings().all(), write=False)
        return [event_from_row(r) for r in reversed(rows)]

    def audit(self, limit: int = 100) -> list[JobEvent]:
        rows = self._tx(
            lambda c: c.execute(sql.operator_events(), {"limit": limit}).mappings().all(), write=False
        )
        return [event_from_row(r) for r in rows]

    def expired_lease_count(self) -> int:
        return self._tx(lambda c: c.execute(sql.count_expired(self._now)).scalar_one(), write=False)

    # -------------------------------------------------------------- worker
    def claim(
        self, worker_id: str, queues: Sequence[str], limit: int = 1, lease_ttl_s: float | None = None
    ) -> list[Job]:
        if not queues:
            raise ValidationError("queues", "name at least one queue")
        if limit < 1:
            return []
        limit = min(limit, MAX_BATCH)
        params: dict[str, Any] = {f"q{i}": q for i, q in enumerate(queues)}
        params.update(limit=limit, worker_id=worker_id, ttl=lease_ttl_s or self.settings.lease_ttl_s)
        n = len(queues)

        if self.dialect == "postgresql":
            if n not in self._q_claim_pg:
                self._q_claim_pg[n] = sql.with_bookkeeping(sql.claim_pg(self._now, n), self._now, "claimed")
            stmt, params["shard"] = self._q_claim_pg[n], self._shard
            rows = self._tx(lambda conn: conn.execute(stmt, params).mappings().all(), single=True)
            return self._in_claim_order(rows)

        def body(conn: Connection) -> list[Job]:  # SQLite, inside BEGIN IMMEDIATE
            if n not in self._q_candidates:
                self._q_candidates[n] = sql.claim_candidates_sqlite(self._now, n)
            old = dict(conn.execute(self._q_candidates[n], params).all())
            if not old:
                return []
            rows = conn.execute(self._q_claim_sqlite, {**params, "ids": list(old)}).mappings().all()
            claimed = self._in_claim_order(rows)
            deltas: Counter[str] = Counter()
            events = []
            for job in claimed:
                deltas[f"s:{old[job.id]}:{job.queue}"] -= 1
                deltas[f"s:{int(S.InProgress)}:{job.queue}"] += 1
                events.append(
                    self._event(job.id, "claimed", old[job.id], int(S.InProgress), worker_id, job.lease_token)
                )
            self._events(conn, events, deltas)
            self._bump(conn, deltas)
            return claimed

        return self._tx(body)

    @staticmethod
    def _in_claim_order(rows: Sequence[Any]) -> list[Job]:
        """RETURNING order is unspecified: hand jobs out in claim order."""
        rows = sorted(rows, key=lambda r: (-r["priority"], r["due_at"], r["id"]))
        return [job_from_row(r) for r in rows]

    def heartbeat(
        self, worker_id: str, leases: Sequence[Lease], lease_ttl_s: float | None = None
    ) -> HeartbeatResult:
        if not leases:
            return HeartbeatResult([], [])
        pairs = [(lease.job_id, lease.token) for lease in leases]
        ttl = lease_ttl_s or self.settings.lease_ttl_s

        def body(conn: Connection) -> HeartbeatResult:
            rows = conn.execute(self._q_renew, {"pairs": pairs, "ttl": ttl}).all()
            renewed = [Lease(r[0], r[1], ts(r[2])) for r in rows]
            done = {(r[0], r[1]) for r in rows}
            missed = [lease for lease in leases if (lease.job_id, lease.token) not in done]
            live: set[str] = set()
            if missed and self.dialect == "postgresql":  # skipped rows held by another transaction
                params = {"pairs": [(x.job_id, x.token) for x in missed]}
                live = set(conn.execute(self._q_live_leases, params).scalars())
            deferred = [lease for lease in missed if lease.job_id in live]
            refused = [lease for lease in missed if lease.job_id not in live]
            if refused:
                events: list[dict[str, Any]] = []
                self._refuse(conn, refused, "heartbeat_refused", worker_id, events)
                deltas: Counter[str] = Counter()
                self._events(conn, events, deltas)
                self._bump(conn, deltas)
            return HeartbeatResult(renewed, refused, deferred)

        return self._tx(body)

    def complete_many(
        self, acks: Sequence[tuple[str, int, Any]], worker_id: str | None = None, *, return_jobs: bool = True
    ) -> list[Job | LeaseLost | None]:
        texts = []
        for _, _, result in acks:
            try:
                texts.append(None if result is None else orjson.dumps(result).decode())
            except TypeError as exc:
                raise ValidationError("result", f"must be JSON-serialisable ({exc})") from None
        if not acks:
            return []

        if self.dialect == "postgresql":
            params = {
                "ids": [a[0] for a in acks],
                "tokens": [a[1] for a in acks],
                "results": texts,
                "shard": self._shard,
            }
            stmt = self._q_complete_many if return_jobs else self._q_ack_many
            rows = self._tx(lambda c: c.execute(stmt, params).mappings().all(), single=True)
            done = {(r["id"], r["lease_token"]): job_from_row(r) if return_jobs else None for r in rows}
            refused = [Lease(a[0], a[1]) for a in acks if (a[0], a[1]) not in done]
            lost = self._tx(lambda c: self._record_refused(c, refused, worker_id)) if refused else {}
            return [done[key] if (key := (a[0], a[1])) in done else lost[key] for a in acks]

        def body(conn: Connection) -> list[Job | LeaseLost | None]:  # SQLite: one statement per ack
            rows = []
            for job_id, token, result in acks:
                params = {"j_id": job_id, "token": token, "new_result": result}
                rows.extend(conn.execute(self._q_complete, params).mappings().all())
            done = {(r["id"], r["lease_token"]): job_from_row(r) for r in rows}
            deltas: Counter[str] = Counter()
            events = []
            for job in done.values():
                deltas[f"s:{int(S.InProgress)}:{job.queue}"] -= 1
                deltas[f"s:{int(S.Completed)}:{job.queue}"] += 1
                events.append(
                    self._event(
                        job.id, "completed", int(S.InProgress), int(S.Completed), worker_id, job.lease_token
                    )
                )
            refused = [Lease(a[0], a[1]) for a in acks if (a[0], a[1]) not in done]
            lost = self._refuse(conn, refused, "completion_refused", worker_id, events)
            self._events(conn, events, deltas)
            self._bump(conn, deltas)
            if not return_jobs:
                return [None if (a[0], a[1]) in done else lost[(a[0], a[1])] for a in acks]
            return [done.get((a[0], a[1])) or lost[(a[0], a[1])] for a in acks]

        return self._tx(body)

    def _record_refused(
        self, conn: Connection, refused: Sequence[Lease], worker_id: str | None
    ) -> dict[tuple[str, int], LeaseLost]:
        """Record refused completions (events and counters); their LeaseLost errors."""
        events: list[dict[str, Any]] = []
        lost = self._refuse(conn, refused, "completion_refused", worker_id, events)
        deltas: Counter[str] = Counter()
        self._events(conn, events, deltas)
        self._bump(conn, deltas)
        return lost

    def _refuse(
        self,
        conn: Connection,
        refused: Sequence[Lease],
        kind: str,
        actor: str | None,
        events: list[dict[str, Any]],
    ) -> dict[tuple[str, int], LeaseLost]:
        """Build the LeaseLost of each refused (job, token) and append its
        refusal event to ``events`` (jobs that no longer exist get no event)."""
        if not refused:
            return {}
        current = {r[0]: r for r in conn.execute(sql.tokens_of(), {"ids": [x.job_id for x in refused]})}
        out = {}
        for lease in refused:
            cur = current.get(lease.job_id)
            if cur is None:
                out[(lease.job_id, lease.token)] = LeaseLost(lease.job_id, lease.token, None, None)
                continue
            status = S(cur[2])
            out[(lease.job_id, lease.token)] = LeaseLost(lease.job_id, lease.token, cur[1], status.name)
            message = refusal_message(kind, actor, lease.token, cur[1], status)
            events.append(self._event(lease.job_id, kind, None, None, actor, lease.token, message))
        return out

    def _apply_decision(
        self,
        conn: Connection,
        row: Any,
        decision: lifecycle.FailureDecision,
        error: dict[str, Any],
        *,
        expired: bool,
        actor: str | None,
    ) -> Job | None:
        """Write one retry decision guarded by (status, token[, expiry]); None if the guard failed."""
        params = {
            "j_id": row["id"],
            "token": row["lease_token"],
            "new_status": int(decision.status),
            "new_retry_count": decision.retry_count,
            "delay": decision.delay_s,
            "new_error": error,
            "expired": 1 if expired else 0,
        }
        found = conn.execute(self._q_recover if expired else self._q_fail, params).mappings().first()
        if found is None:
            return None
        job = job_from_row(found)
        kind, message = failure_event(decision, error, expired)
        deltas = Counter({f"s:{int(S.InProgress)}:{job.queue}": -1, f"s:{int(job.status)}:{job.queue}": 1})
        ev = self._event(job.id, kind, int(S.InProgress), int(job.status), actor, row["lease_token"], message)
        self._events(conn, [ev], deltas)
        self._bump(conn, deltas)
        return job

    def fail(
        self,
        job_id: str,
        token: int,
        error: dict[str, Any],
        *,
        permanent: bool = False,
        worker_id: str | None = None,
    ) -> Job:
        def body(conn: Connection) -> Job:
            row = conn.execute(sql.lock_job_for_update(), {"j_id": job_id}).mappings().first()
            if row is None:
                raise JobNotFound(job_id)
            if row["status"] != int(S.InProgress) or row["lease_token"] != token:
                raise _Refused(job_id, token, "failure_refused", worker_id)
            decision = lifecycle.decide_failure(
                row["retry_count"], row["max_retries"], self.settings.retry, permanent=permanent
            )
            job = self._apply_decision(conn, row, decision, error, expired=False, actor=worker_id)
            if job is None:  # pragma: no cover - the row is locked, the guard cannot fail
                raise _Refused(job_id, token, "failure_refused", worker_id)
            return job

        try:
            return self._tx(body)
        except _Refused as refused:
            raise self._record_refusal(refused) from None

    def release(self, job_id: str, token: int, worker_id: str | None = None) -> Job:
        def body(conn: Connection) -> Job:
            found = conn.execute(self._q_release, {"j_id": job_id, "token": token}).mappings().first()
            if found is None:
                raise _Refused(job_id, token, "release_refused", worker_id)
            job = job_from_row(found)
            deltas = Counter(
                {f"s:{int(S.InProgress)}:{job.queue}": -1, f"s:{int(S.Scheduled)}:{job.queue}": 1}
            )
            ev = self._event(job_id, "released", int(S.InProgress), int(S.Scheduled), worker_id, token)
            self._events(conn, [ev], deltas)
            self._bump(conn, deltas)
            return job

        try:
            return self._tx(body)
        except _Refused as refused:
            raise self._record_refusal(refused) from None

    # ------------------------------------------------------------ operator
    def _operator(self, job_id: str, op: Operation, actor: str, extra: dict[str, Any]) -> Job:
        def body(conn: Connection) -> Job:
            row = conn.execute(sql.lock_job_for_update(), {"j_id": job_id}).mappings().first()
            if row is None:
                raise JobNotFound(job_id)
            old = S(row["status"])
            lifecycle.check_operation(job_id, op, old)
            params = {"j_id": job_id, "old_status": int(old), **extra}
            job = job_from_row(conn.execute(self._q_operator[op], params).mappings().one())
            deltas = Counter({f"s:{int(old)}:{job.queue}": -1, f"s:{int(job.status)}:{job.queue}": 1})
            kind = {Operation.CANCEL: "canceled", Operation.REQUEUE: "requeued"}.get(op, "retried_now")
            ev = self._event(job_id, kind, int(old), int(job.status), actor, row["lease_token"])
            self._events(conn, [ev], deltas)
            self._bump(conn, deltas)
            return job

        return self._tx(body)

    def cancel(self, job_id: str, *, actor: str = "operator") -> Job:
        return self._operator(job_id, Operation.CANCEL, actor, {})

    def requeue(self, job_id: str, *, actor: str = "operator", reset_retries: bool = True) -> Job:
        return self._operator(job_id, Operation.REQUEUE, actor, {"keep": 0 if reset_retries else 1})

    def retry_now(self, job_id: str, *, actor: str = "operator") -> Job:
        return self._operator(job_id, Operation.RETRY_NOW, actor, {})

    # ------------------------------------------------------------ recovery
    def _recovery_plan(self, rows: Sequence[Any]) -> list[tuple[Any, lifecycle.FailureDecision]]:
        policy = self.settings.retry
        return [(r, lifecycle.decide_failure(r["retry_count"], r["max_retries"], policy)) for r in rows]

    @staticmethod
    def _recovered(row: Any, decision: lifecycle.FailureDecision) -> RecoveredJob:
        return RecoveredJob(
            job_id=row["id"],
            name=row["name"],
            queue=row["queue"],
            worker_id=row["worker_id"],
            token=row["lease_token"],
            outcome=decision.status,
            retry_count=decision.retry_count,
            delay_s=decision.delay_s,
        )

    def recover_expired(self, limit: int | None = None, *, owner: str = "recovery") -> RecoveryReport:
        limit = min(limit or self.settings.recovery_batch, MAX_BATCH)
        t0 = time.perf_counter()

        def body(conn: Connection) -> tuple[list[RecoveredJob], bool]:
            was = None
            if self.dialect == "postgresql":
                was = conn.execute(self._q_walk_indexes).mappings().one()
            rows = conn.execute(sql.expired_leases(self._now, lock=True), {"limit": limit}).mappings().all()
            if was is not None:
                conn.execute(self._q_planner_settings, {name: was[name] for name in sql.PLANNER_OFF})
            plan = [(row, decision, _lease_expired(row)) for row, decision in self._recovery_plan(rows)]
            if self.dialect == "postgresql":
                applied = self._recover_pg(conn, plan, owner)
                done = [self._recovered(row, d) for row, d, _ in plan if row["id"] in applied]
            else:
                done = [
                    self._recovered(row, d)
                    for row, d, error in plan
                    if self._apply_decision(conn, row, d, error, expired=True, actor=owner)
                ]
            return done, len(rows) >= limit

        done, more = self._tx(body)
        ms = (time.perf_counter() - t0) * 1000
        return RecoveryReport.from_outcomes(done, dry_run=False, more=more, owner=owner, duration_ms=ms)

    def _recover_pg(self, conn: Connection, plan: Sequence[_Planned], owner: str) -> set[str]:
        """PostgreSQL: apply a batch of recovery decisions in one statement
        (statements.recover_jobs_pg with events and counters); the ids applied."""
        if not plan:
            return set()
        events = [failure_event(d, error, True) for _, d, error in plan]
        params = {
            "ids": [row["id"] for row, _, _ in plan],
            "tokens": [row["lease_token"] for row, _, _ in plan],
            "new_statuses": [int(d.status) for _, d, _ in plan],
            "new_retry_counts": [d.retry_count for _, d, _ in plan],
            "delays": [d.delay_s for _, d, _ in plan],
            "errors": [orjson.dumps(error).decode() for _, _, error in plan],
            "messages": [message for _, message in events],
            "actor": owner,
            "shard": self._shard,
        }
        return {r["id"] for r in conn.execute(self._q_recover_pg, params).mappings()}

    def preview_recovery(self, limit: int | None = None) -> RecoveryReport:
        limit = min(limit or self.settings.recovery_batch, MAX_BATCH)
        t0 = time.perf_counter()
        stmt = sql.expired_leases(self._now, lock=False)
        rows = self._tx(lambda c: c.execute(stmt, {"limit": limit}).mappings().all(), write=False)
        done = [self._recovered(r, d) for r, d in self._recovery_plan(rows)]
        ms = (time.perf_counter() - t0) * 1000
        return RecoveryReport.from_outcomes(
            done, dry_run=True, more=len(rows) >= limit, owner=None, duration_ms=ms
        )

    def record_recovery_run(self, run: RecoveryRun) -> None:
        row = {
            "id": run.id,
            "started_at": run.started_at.timestamp(),
            "finished_at": run.finished_at.timestamp(),
            "owner": run.owner,
            "trigger": run.trigger,
            "recovered": run.recovered,
            "failed": run.failed,
            "duration_ms": run.duration_ms,
        }
        self._tx(lambda c: c.execute(sql.insert_recovery_run(), row))

    def recovery_runs(self, limit: int = 50) -> list[RecoveryRun]:
        rows = self._tx(
            lambda c: c.execute(sql.recent_recovery_runs(), {"limit": limit}).mappings().all(), write=False
        )
        return [run_from_row(r) for r in rows]

    # --------------------------------------------------------------- locks
    def acquire_lock(self, name: str, owner: str, ttl_s: float) -> bool:
        stmt = sql.acquire_lock(self.dialect, self._now)
        got = self._tx(lambda c: c.execute(stmt, {"name": name, "owner": owner, "ttl": ttl_s}).first())
        return got is not None

    def release_lock(self, name: str, owner: str) -> bool:
        res = self._tx(lambda c: c.execute(sql.release_lock(), {"name": name, "owner": owner}))
        return res.rowcount > 0

    def lock_info(self, name: str) -> LockInfo:
        stmt = sql.lock_holder(self._now)
        row = self._tx(lambda c: c.execute(stmt, {"name": name}).first(), write=False)
        return LockInfo(name, row[0], ts(row[1])) if row else LockInfo(name, None, None)

    # ------------------------------------------------------------- workers
    def worker_heartbeat(self, info: WorkerInfo) -> None:
        row = {
            "id": info.id,
            "host": info.host,
            "pid": info.pid,
            "queues": list(info.queues),
            "concurrency": info.concurrency,
            "jobs_in_hand": list(info.jobs_in_hand),
            "started_at": info.started_at.timestamp() if info.started_at else time.time(),
        }
        stmt = sql.upsert_worker(self.dialect, self._now)
        self._tx(lambda c: c.execute(stmt, row))

    def remove_worker(self, worker_id: str) -> None:
        self._tx(lambda c: c.execute(sql.delete_worker(), {"id": worker_id}))

    def workers(self) -> list[WorkerInfo]:
        rows = self._tx(lambda c: c.execute(sql.all_workers()).mappings().all(), write=False)
        return [worker_from_row(r) for r in rows]

    # ----------------------------------------------------------- retention
    def purge(self, older_than_s: float, limit: int = 1000) -> int:
        def body(conn: Connection) -> int:
            stmt = sql.purge_candidates(self._now)
            rows = conn.execute(stmt, {"age": older_than_s, "limit": min(limit, MAX_BATCH)}).all()
            if not rows:
                return 0
            ids = [r[0] for r in rows]
            conn.execute(sql.delete_events_of(), {"ids": ids})
            conn.execute(sql.delete_jobs(), {"ids": ids})
            self._bump(conn, _negate(rows))
            return len(ids)

        return self._tx(body)

    def wakeups(self, queues: Sequence[str]) -> PgWakeups | None:
        """PostgreSQL: LISTEN on WAKEUP_CHANNEL (enqueue notifies in its
        transaction). SQLite has no such channel: None, workers poll."""
        if self.dialect != "postgresql":
            return None
        return PgWakeups(self._write_engine, WAKEUP_CHANNEL, queues)

    def close(self) -> None:
        self._write_engine.dispose()
        self._read_engine.dispose()


#: A recovery decision: the job's row, the retry decision, the error to record.
_Planned = tuple[Any, lifecycle.FailureDecision, dict[str, Any]]


def _lease_expired(row: Any) -> dict[str, Any]:
    """The error recovery records on a job whose lease expired."""
    message = f"lease of {row['worker_id']} (token {row['lease_token']}) expired"
    return {"type": "LeaseExpired", "message": message, "traceback": None}


def _negate(rows: Sequence[Any]) -> Counter[str]:
    deltas: Counter[str] = Counter()
    for _, status, queue in rows:
        deltas[f"s:{status}:{queue}"] -= 1
    return deltas
