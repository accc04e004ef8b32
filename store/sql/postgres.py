"""The PostgreSQL strategy of the SQL store: each hot-path change (enqueue,
claim, acks, a recovery batch) is ONE autocommit statement whose job events
and counters ride along as CTEs (``pg_statements.py``); claims and renewals
skip locked rows (``FOR UPDATE SKIP LOCKED``); counters are sharded by
process; enqueue notifies workers that LISTEN (``wakeups.py``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import orjson
from sqlalchemy import CTE, Connection, Insert, Table, Text, bindparam, cast, column, func, select, text
from sqlalchemy.dialects import postgresql

from store.lifecycle import EventKind, Operation, rule
from store.models import Job, failure_event
from store.sql import pg_statements as pg
from store.sql import statements as sql
from store.sql.bookkeeping import CHANGE_COLUMNS
from store.sql.plumbing import Dialect, Planned, SqlPlumbing
from store.sql.rows import job_from_row, json_texts, new_jobs
from store.sql.wakeups import JOB_CHANNEL, WAKEUP_CHANNEL, PgWakeups

#: Counter shards; a process writes to one, readers sum them.
SHARDS = 16
#: Start of the oldest other open transaction of this database (epoch seconds).
_OLDEST_TRANSACTION = text(
    "SELECT extract(epoch FROM min(xact_start)) FROM pg_stat_activity"
    " WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL"
    " AND backend_type = 'client backend'"
)


class PostgresDialect(Dialect):
    """PostgreSQL: single-statement changes, SKIP LOCKED, LISTEN/NOTIFY."""

    def __init__(self, p: SqlPlumbing) -> None:
        super().__init__(p)
        now = p._now
        self.shard = os.getpid() % SHARDS
        self._q_enqueue = pg.enqueue_jobs_pg(now)
        self._q_enqueue_one = pg.enqueue_jobs_pg(now, one=True)
        self._q_claim: dict[tuple[int, bool], Any] = {}
        done = rule(Operation.COMPLETE).event
        assert done is not None
        self._q_complete = pg.with_bookkeeping(pg.complete_jobs_pg(now), now, done, handler_minutes=True)
        self._q_ack = pg.with_bookkeeping(
            pg.complete_jobs_pg(now), now, done, ids_only=True, handler_minutes=True
        )
        self._q_recover = pg.with_bookkeeping(
            pg.recover_jobs_pg(now), now, EventKind.LEASE_EXPIRED, by_actor=True, ids_only=True, attempts=True
        )
        self._q_expired = sql.expired_leases(now, lock=True)
        self._q_walk_indexes = pg.walk_indexes_pg()
        self._q_planner_settings = pg.planner_settings_pg()
        self._q_live = sql.live_leases(now)
        self._q_progress = pg.set_progress_pg(now)

    def upsert(self, table: Table) -> Insert:
        return postgresql.insert(table)

    def writes_since(self, conn: Connection) -> float | None:
        """``xact_start`` of the oldest other open transaction in this
        database (``pg_stat_activity``): a statement's ``now()`` is its
        transaction's start, so a change stamped in an ended hour can commit
        later only from a transaction that started before the hour ended."""
        found = conn.execute(_OLDEST_TRANSACTION).scalar()
        return None if found is None else float(found)

    def changes_from(self) -> CTE:
        """``jsonb_to_recordset`` of the array, typed by CHANGE_COLUMNS."""
        array = cast(bindparam("changes", type_=Text()), postgresql.JSONB)
        rows = func.jsonb_to_recordset(array).table_valued(*(column(n, t) for n, t in CHANGE_COLUMNS))
        derived = rows.render_derived(name="c", with_types=True)
        return select(*derived.c).cte("chg")

    def insert_in(self, conn: Connection, rows: list[dict[str, Any]]) -> list[Job]:
        """Insert and return the jobs: what the caller sent (JSON columns read
        back from the JSON text sent, as ``get`` would give them) with the
        times the statement returns (its other columns start empty or zero)."""
        texts = json_texts(rows)
        if len(rows) == 1:  # values, not one-element arrays
            [row] = rows
            params: dict[str, Any] = {
                p: texts[c][0] if c in texts else row[c] for p, c, _ in pg.ENQUEUE_ARRAYS
            }
            stmt = self._q_enqueue_one
        else:
            params = {p: texts[c] if c in texts else [r[c] for r in rows] for p, c, _ in pg.ENQUEUE_ARRAYS}
            for p in pg.DOUBLE_ARRAYS:  # psycopg dumps no list mixing ints and floats (delay_s=5 beside 0.0)
                params[p] = [None if v is None else float(v) for v in params[p]]
            stmt = self._q_enqueue
        params.update(shard=self.shard, channel=JOB_CHANNEL)
        stamped = {r["id"]: r for r in conn.execute(stmt, params).mappings()}
        return new_jobs(rows, texts, stamped)

    def insert(self, rows: list[dict[str, Any]]) -> list[Job]:
        """One autocommit statement (events, counters and notices as CTEs)."""
        return self.p.tx(lambda conn: self.insert_in(conn, rows), single=True)

    def begin_joined(self, conn: Connection) -> None:
        """Nothing to do: psycopg began the transaction at its first
        statement, or begins it at the SAVEPOINT's."""

    def claim(self, params: dict[str, Any], queues: int) -> list[Any]:
        """See Dialect.claim; with the parameter ``job``, that job alone
        (a notice named it: ``SqlStore.claim_notified``)."""
        key = (queues, "job" in params)
        if key not in self._q_claim:
            claimed = rule(Operation.CLAIM).event
            assert claimed is not None
            self._q_claim[key] = pg.with_bookkeeping(
                pg.claim_pg(self.p._now, queues, one=key[1]), self.p._now, claimed
            )
        stmt = self._q_claim[key]
        return self.p.tx(
            lambda conn: conn.execute(stmt, {**params, "shard": self.shard}).mappings().all(), single=True
        )

    def complete(
        self, acks: Sequence[tuple[str, int, str | None]], worker_id: str | None, return_jobs: bool
    ) -> dict[tuple[str, int], Job | None]:
        params = {
            "ids": [a[0] for a in acks],
            "tokens": [a[1] for a in acks],
            "results": [a[2] for a in acks],
            "shard": self.shard,
        }
        stmt = self._q_complete if return_jobs else self._q_ack
        rows = self.p.tx(lambda c: c.execute(stmt, params).mappings().all(), single=True)
        return {(r["id"], r["lease_token"]): job_from_row(r) if return_jobs else None for r in rows}

    def set_progress(self, reports: Sequence[tuple[str, int, dict[str, Any]]]) -> set[tuple[str, int]]:
        """The batch in one autocommit statement (``pg_statements.set_progress_pg``)."""
        params = {
            "ids": [r[0] for r in reports],
            "tokens": [r[1] for r in reports],
            "values": [orjson.dumps(r[2]).decode() for r in reports],
        }
        rows = self.p.tx(lambda c: c.execute(self._q_progress, params).all(), single=True)
        return {(r[0], r[1]) for r in rows}

    def live(self, conn: Connection, missed: Sequence[Any]) -> set[str]:
        params = {"pairs": [(x.job_id, x.token) for x in missed]}
        return set(conn.execute(self._q_live, params).scalars())

    def expired(self, conn: Connection, limit: int) -> list[Any]:
        """Planner sorts and bitmap scans off for this SELECT alone, then
        restored (see ``pg_statements.walk_indexes_pg``)."""
        was = conn.execute(self._q_walk_indexes).mappings().one()
        rows = conn.execute(self._q_expired, {"limit": limit}).mappings().all()
        conn.execute(self._q_planner_settings, {name: was[name] for name in pg.PLANNER_OFF})
        return list(rows)

    def recover(self, conn: Connection, plan: Sequence[Planned], owner: str) -> set[str]:
        """The batch in one statement (``pg_statements.recover_jobs_pg``)."""
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
            "attempt_nos": [row["retry_count"] + 1 for row, _, _ in plan],
            "messages": [message for _, message in events],
            "actor": owner,
            "shard": self.shard,
        }
        return {r["id"] for r in conn.execute(self._q_recover, params).mappings()}

    def wakeups(self, queues: Sequence[str]) -> PgWakeups:
        """LISTEN on WAKEUP_CHANNEL and JOB_CHANNEL (enqueue notifies in its statement)."""
        return PgWakeups(self.p.write_engine, WAKEUP_CHANNEL, queues)
