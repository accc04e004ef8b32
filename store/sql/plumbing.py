"""What every part of the SQL store shares: engines, transactions and the
mapping of outages, the bookkeeping of a change (job events and counters in
the same transaction), the recording of refused stale writes, and the
``Dialect`` strategy that SQLite and PostgreSQL each implement
(``store/sql/sqlite.py``, ``store/sql/postgres.py``).

No operation branches on the dialect: where the engines differ, the store
asks its ``Dialect``.
"""

from __future__ import annotations

import abc
import contextlib
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import orjson
from sqlalchemy import CTE, Connection, CursorResult, Engine, Insert, Table
from sqlalchemy.exc import DBAPIError

from store.base import StoreSettings, Wakeups
from store.errors import JobNotFound, LeaseLost
from store.handler_metrics import FAILED, RETRIED
from store.lifecycle import EventKind, FailureDecision, JobStatus
from store.models import Job, JobSpec, Lease, failure_event, refusal_message, trimmed_error
from store.sql import bookkeeping as bk
from store.sql import operating_statements as ops
from store.sql import schema
from store.sql import statements as sql
from store.sql.classify import sqlstate, translate
from store.sql.engine import make_engines, pg_statement_timeout_s
from store.sql.handler_minutes import count_outcomes
from store.sql.joined import joined_connection, run_joined
from store.sql.rows import job_from_row
from store.sql.writer_lock import WriterLock
from store.statuses import refusal_recorded

T = TypeVar("T")

#: The write lock of an engine that has none (PostgreSQL), and of reads.
_NO_LOCK = contextlib.nullcontext()
#: PostgreSQL SQLSTATEs worth retrying the whole transaction for.
_RETRYABLE_PG = {"40P01", "40001"}  # deadlock_detected, serialization_failure
_TX_ATTEMPTS = 4

#: The parameters of the bookkeeping statements (``store/sql/bookkeeping.py``).
BOOK_KEYS = ("changes", "shard")

#: A recovery decision: the job's row, the retry decision, the error to record.
Planned = tuple[Any, Any, dict[str, Any]]


class Refused(Exception):
    """Internal: a guarded write matched nothing; carries what to record."""

    def __init__(self, job_id: str, token: int, kind: EventKind, actor: str | None) -> None:
        self.job_id, self.token, self.kind, self.actor = job_id, token, kind, actor


def event_row(
    job_id: str,
    kind: EventKind | None,
    source: int | None,
    target: int | None,
    actor: str | None,
    token: int | None,
    message: str | None = None,
    queue: str | None = None,
    *,
    logged: bool = True,
) -> dict[str, Any]:
    """One change for ``SqlPlumbing.book`` (``bookkeeping.CHANGE_COLUMNS``):
    job ``job_id`` of ``queue`` moving ``source -> target`` with an event
    ``kind`` (None: no event), appended as a job event unless ``logged`` is
    False. Only a change that names its queue moves the status counts (and,
    for HISTORY_KINDS, the per-queue totals and history buckets)."""
    return {
        "job_id": job_id,
        "queue": queue,
        "kind": None if kind is None else kind.value,
        "from_status": source,
        "to_status": target,
        "actor": actor,
        "token": token,
        "message": message,
        "logged": 1 if logged and kind is not None else 0,
        "counted": bk.counted(kind, queue),
        "weight": 1,
    }


class Precompiled:
    """A statement compiled once for one engine's dialect and run with
    ``Connection.exec_driver_sql``: no cache lookup, parameter processing or
    result set-up on each execution (~15 us of client CPU a statement). For
    the bookkeeping statements, whose parameters are plain str, int, float or
    None (no type processing) and whose results, if read, need none either
    (ids, numbers). Errors are
    SQLAlchemy's, as with ``Connection.execute``.

    ``keys`` are the names of the parameters each row gives; the clock's
    ``clock_offset`` (``statements.clock``) is filled in from ``offset_s()``.
    Raises ValueError when the statement takes another parameter."""

    def __init__(self, stmt: Any, dialect: Any, keys: Sequence[str], offset_s: Callable[[], float]) -> None:
        compiled = stmt.compile(dialect=dialect, column_keys=list(keys))
        unknown = set(compiled.binds) - {*keys, "clock_offset"}
        if unknown:
            raise ValueError(f"parameters without a value: {sorted(unknown)}")
        self.sql = str(compiled)
        #: Parameter names in order (qmark: SQLite), or None (named: psycopg).
        self._order: tuple[str, ...] | None = (
            tuple(compiled.positiontup) if compiled.positiontup is not None else None
        )
        self._offset_s = offset_s

    def run(self, conn: Connection, rows: Sequence[dict[str, Any]]) -> CursorResult[Any]:
        """Execute once per row (executemany for several) in ``conn``'s
        transaction; the result (a single row's RETURNING rows, unprocessed)."""
        offset = self._offset_s()
        if self._order is None:
            params: list[Any] = [{**row, "clock_offset": offset} for row in rows]
        else:
            order = self._order
            params = [tuple(offset if k == "clock_offset" else row[k] for k in order) for row in rows]
        return conn.exec_driver_sql(self.sql, params if len(params) != 1 else params[0])


class Dialect(abc.ABC):
    """Where SQLite and PostgreSQL differ, as one strategy per engine. Each
    method is the engine half of one store operation; ``p`` is the store."""

    def __init__(self, p: SqlPlumbing) -> None:
        self.p = p

    #: Counter shard this process writes to (readers sum the shards).
    shard: int = 0

    @abc.abstractmethod
    def upsert(self, table: Table) -> Insert:
        """This dialect's INSERT that supports ON CONFLICT."""

    @abc.abstractmethod
    def changes_from(self) -> CTE:
        """The changes of ``SqlPlumbing.book`` read from one JSON array bound
        to ``changes`` (objects with the keys of ``bookkeeping.CHANGE_COLUMNS``),
        as a CTE with those columns."""

    def writes_since(self, conn: Connection) -> float | None:
        """The start (epoch seconds, the store's clock without its offset) of
        the oldest other transaction still open, whose writes may yet commit
        with a time stamped before now; None when no write can be in flight
        (SQLite: one writer at a time). The history roll-up waits for it."""
        return None

    #: The parameters ``event_source`` binds (each run of the events statement).
    event_keys: tuple[str, ...] = BOOK_KEYS

    def event_source(self) -> CTE:
        """Where the events statement of ``SqlPlumbing.book`` reads its
        changes; ``event_params`` gives its parameters. By default
        ``changes_from`` (one JSON array)."""
        return self.changes_from()

    def event_params(self, changes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The parameters of one booking's events statement (one dict a run)."""
        return [{"changes": orjson.dumps(changes).decode()}]

    @abc.abstractmethod
    def insert_in(self, conn: Connection, rows: list[dict[str, Any]]) -> list[Job]:
        """Insert job rows (``SqlStore._row_for``) with their events and
        counters in ``conn``'s transaction, in order. Raises IntegrityError
        when an idempotency key is taken."""

    def insert(self, rows: list[dict[str, Any]]) -> list[Job]:
        """``insert_in`` as one atomic unit of its own (nothing written on error)."""
        return self.p.tx(lambda conn: self.insert_in(conn, rows))

    @abc.abstractmethod
    def claim(self, params: dict[str, Any], queues: int) -> list[Any]:
        """Lease due jobs (params of ``statements.due`` and ``lease``; with
        ``job``, only that job); the rows."""

    @abc.abstractmethod
    def complete(
        self, acks: Sequence[tuple[str, int, str | None]], worker_id: str | None, return_jobs: bool
    ) -> dict[tuple[str, int], Job | None]:
        """Apply guarded acks with their events and counters; the applied
        ones by (id, token): the Completed job, or None without ``return_jobs``."""

    @abc.abstractmethod
    def set_progress(self, reports: Sequence[tuple[str, int, dict[str, Any]]]) -> set[tuple[str, int]]:
        """Write checked progress reports ``(id, token, value)``, each fenced
        by (InProgress, token) and stamped with the store's clock, as one
        atomic unit; the (id, token) of those written."""

    def live(self, conn: Connection, missed: Sequence[Lease]) -> set[str]:
        """Of leases a renewal skipped, the ids still valid (deferred, not
        refused). Only an engine that skips locked rows has any."""
        return set()

    @abc.abstractmethod
    def expired(self, conn: Connection, limit: int) -> list[Any]:
        """Up to ``limit`` expired leases, oldest first, locked for recovery."""

    @abc.abstractmethod
    def recover(self, conn: Connection, plan: Sequence[Planned], owner: str) -> set[str]:
        """Apply recovery decisions (guarded per job); the ids applied."""

    def wakeups(self, queues: Sequence[str]) -> Wakeups | None:
        """A ready-job listener, or None when the engine has no channel."""
        return None

    @abc.abstractmethod
    def begin_joined(self, conn: Connection) -> None:
        """Before a store call writes in an application's transaction on
        ``conn`` (store/sql/joined.py): make sure it is open in the database."""


class SqlPlumbing:
    """Engines, transactions and bookkeeping of one SQL store handle."""

    def __init__(
        self,
        url: str,
        settings: StoreSettings | None = None,
        pool_size: int = 5,
        engine: Engine | None = None,
    ) -> None:
        self.url = url
        self.settings = settings or StoreSettings()
        #: Seconds added to the database clock; tests move time with it.
        self.clock_offset_s = 0.0
        engines = make_engines(url, pool_size, engine=engine)
        #: False when the engines are an application's (``engine=``): close() leaves them open.
        self._owns_engines = engine is None
        self.write_engine, self.read_engine, self.single_engine = engines.write, engines.read, engines.single
        #: Taken around every write transaction (SQLite: store/sql/writer_lock.py).
        self._writer: AbstractContextManager[None] = engines.writer or _NO_LOCK
        dialect = engines.dialect
        #: Seconds a PostgreSQL read may run (LEASEHOLD_PG_STATEMENT_TIMEOUT); None on SQLite.
        self.statement_timeout_s = pg_statement_timeout_s() if dialect == "postgresql" else None
        self._now = sql.clock(lambda: self.clock_offset_s)
        self.dialect: Dialect = self.make_dialect(dialect)
        self._q_now = sql.select_now(self._now)
        self._q_attempt = ops.insert_attempt(self._now)
        engine_dialect = self.write_engine.dialect
        offset = lambda: self.clock_offset_s  # noqa: E731
        src = self.dialect.changes_from()
        upsert = self.dialect.upsert
        logged = bk.record_events(self.dialect.event_source(), self._now)
        self._q_events = Precompiled(logged, engine_dialect, self.dialect.event_keys, offset)
        counted = bk.add_to_counters(upsert(schema.counters), src)
        self._q_counters = Precompiled(counted, engine_dialect, BOOK_KEYS, offset)
        bucketed = bk.add_to_history(upsert(schema.history), src, self._now)
        self._q_history = Precompiled(bucketed, engine_dialect, BOOK_KEYS, offset)

    def tx(self, fn: Callable[[Connection], T], write: bool = True, single: bool = False) -> T:
        """Run ``fn`` in one transaction; retry deadlocks, map outages to
        StoreUnavailable and refused values to ValidationError
        (store/sql/classify.py). ``single``: ``fn`` runs one statement atomic on its
        own, on the single engine (PostgreSQL: autocommit, saving the BEGIN
        and COMMIT round trips, with no statement timeout). Reads
        (``write=False``) run on the read engine, under the statement timeout
        on PostgreSQL. In ``SqlStore.joined``, ``fn`` runs in the
        application's transaction instead (store/sql/joined.py)."""
        outer = joined_connection(self)
        if outer is not None:
            return run_joined(outer, fn, self.dialect.begin_joined)
        if single:
            engine = self.single_engine
        else:
            engine = self.write_engine if write else self.read_engine
        writer = self._writer if engine is self.write_engine else _NO_LOCK
        for attempt in range(_TX_ATTEMPTS):
            try:
                with writer, engine.begin() as conn:
                    return fn(conn)
            except DBAPIError as exc:
                if sqlstate(exc) in _RETRYABLE_PG and attempt + 1 < _TX_ATTEMPTS:
                    time.sleep(0.005 * (attempt + 1))
                    continue
                translated = translate(exc, self.statement_timeout_s if engine is self.read_engine else None)
                if translated is exc:
                    raise
                raise translated from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def read(self, stmt: Any, params: dict[str, Any] | None = None) -> list[Any]:
        """Rows (mappings) of one read statement."""
        return self.tx(lambda c: c.execute(stmt, params or {}).mappings().all(), write=False)

    def now(self) -> float:
        return self.tx(lambda conn: conn.execute(self._q_now).scalar_one(), write=False)

    def book(self, conn: Connection, changes: Sequence[dict[str, Any]]) -> None:
        """Write the bookkeeping of ``changes`` (``event_row``) in ``conn``'s
        transaction: their job events, counters and history buckets, by the
        statements of ``store/sql/bookkeeping.py`` that PostgreSQL's
        one-statement changes run as CTEs, over the changes sent as one JSON
        array; the counters and buckets read one row per distinct
        ``bookkeeping.COUNT_COLUMNS`` with its ``weight`` (50 acks of one
        queue are one row), the events every logged change
        (``Dialect.event_params``). A statement with nothing to add is not sent."""
        if not changes:
            return
        logged = [c for c in changes if c["logged"]]
        if logged:
            self._q_events.run(conn, self.dialect.event_params(logged))
        groups = Counter(tuple(c[k] for k in bk.COUNT_COLUMNS) for c in changes)
        grouped = [{**dict(zip(bk.COUNT_COLUMNS, g, strict=True)), "weight": n} for g, n in groups.items()]
        params = [{"changes": orjson.dumps(grouped).decode(), "shard": self.dialect.shard}]
        self._q_counters.run(conn, params)
        if any(c["counted"] for c in changes):
            self._q_history.run(conn, params)

    def refuse(
        self, conn: Connection, refused: Sequence[Lease], kind: EventKind, actor: str | None
    ) -> dict[tuple[str, int], LeaseLost]:
        """Record a refusal event per refused (job, token) in ``conn`` that
        ``statuses.refusal_recorded`` keeps (jobs that no longer exist get
        none) and return each one's LeaseLost."""
        if not refused:
            return {}
        current = {r[0]: r for r in conn.execute(sql.tokens_of(), {"ids": [x.job_id for x in refused]})}
        out, events = {}, []
        for lease in refused:
            cur = current.get(lease.job_id)
            if cur is None:
                out[(lease.job_id, lease.token)] = LeaseLost(lease.job_id, lease.token, None, None)
                continue
            status = JobStatus(cur[2])
            out[(lease.job_id, lease.token)] = LeaseLost(lease.job_id, lease.token, cur[1], status.name)
            if not refusal_recorded(kind, lease.token, cur[1], status):
                continue
            message = refusal_message(kind, actor, lease.token, cur[1], status)
            events.append(event_row(lease.job_id, kind, None, None, actor, lease.token, message))
        self.book(conn, events)
        return out

    def refusal(self, refused: Refused) -> LeaseLost:
        """Record one refused write in its own transaction; the error to
        raise. Raises JobNotFound when the job no longer exists."""

        def body(conn: Connection) -> LeaseLost:
            key = (refused.job_id, refused.token)
            lost = self.refuse(conn, [Lease(*key)], refused.kind, refused.actor)[key]
            if lost.current_token is None:
                raise JobNotFound(refused.job_id)
            return lost

        return self.tx(body)

    def apply_decision(
        self,
        conn: Connection,
        stmt: Any,
        row: Any,
        decision: FailureDecision,
        error: dict[str, Any],
        *,
        expired: bool,
        actor: str | None,
    ) -> Job | None:
        """Write one retry decision with ``stmt`` (``statements.apply_failure``,
        guarded by status, token[, expiry]) and its event and counters; None
        when the guard matched nothing."""
        error = trimmed_error(error)
        params = {
            "j_id": row["id"],
            "token": row["lease_token"],
            "new_status": int(decision.status),
            "new_retry_count": decision.retry_count,
            "delay": decision.delay_s,
            "new_error": error,
            "expired": 1 if expired else 0,
        }
        found = conn.execute(stmt, params).mappings().first()
        if found is None:
            return None
        job = job_from_row(found)
        attempt = {
            "job_id": job.id,
            "attempt": row["retry_count"] + 1,
            "token": row["lease_token"],
            "worker_id": row["worker_id"],
            "error": error,
            "started_at": row["started_at"],
        }
        conn.execute(self._q_attempt, attempt)
        if not expired:  # a handler's failure (recovery's are no handler outcome)
            outcome = FAILED if job.status is JobStatus.Failed else RETRIED
            run = (job.name, found["last_updated_at"], row["started_at"], outcome)
            count_outcomes(conn, self.dialect.upsert(schema.handler_minutes), [run], self.dialect.shard)
        kind, message = failure_event(decision, error, expired)
        event = event_row(
            job.id,
            kind,
            int(JobStatus.InProgress),
            int(job.status),
            actor,
            row["lease_token"],
            message,
            job.queue,
        )
        self.book(conn, [event])
        return job

    def make_dialect(self, name: str) -> Dialect:
        """The strategy for the engine ``name`` (``postgresql`` or ``sqlite``): the
        concrete store names its dialects, which build on this module."""
        raise NotImplementedError

    def close(self) -> None:
        for engine in {self.write_engine, self.read_engine, self.single_engine} if self._owns_engines else ():
            engine.dispose()
        if isinstance(self._writer, WriterLock):
            self._writer.close()


__all__ = ["Dialect", "JobSpec", "Planned", "Refused", "SqlPlumbing", "event_row"]
