"""The SQLite strategy of the SQL store: every write inside ``BEGIN
IMMEDIATE`` (engine.py), one statement per job where SQLite has no arrays,
and the bookkeeping of each change (events, counters, history) written by
``SqlPlumbing.book`` in the same transaction: the statements PostgreSQL runs
as CTEs (``store/sql/bookkeeping.py``), over the changes sent as JSON. No wake-up channel: workers poll.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from sqlalchemy import CTE, Connection, Insert, Table, Text, bindparam, func, select
from sqlalchemy.dialects import sqlite

from store.group_commit import GroupCommit
from store.handler_metrics import SUCCEEDED
from store.lifecycle import JobStatus, Operation, rule
from store.models import Job
from store.sql import operating_statements as ops
from store.sql import statements as sql
from store.sql.bookkeeping import CHANGE_COLUMNS
from store.sql.changes import const
from store.sql.handler_minutes import count_outcomes
from store.sql.joined import joined_connection
from store.sql.plumbing import Dialect, Planned, Precompiled, SqlPlumbing, event_row
from store.sql.rows import INSERT_JOB_KEYS, job_from_row, json_texts, new_jobs
from store.sql.schema import handler_minutes


class SqliteDialect(Dialect):
    """SQLite: one writer at a time, bookkeeping after the change, polling workers."""

    def __init__(self, p: SqlPlumbing) -> None:
        super().__init__(p)
        now = p._now
        self._q_insert = sql.insert_jobs(now)
        offset = lambda: p.clock_offset_s  # noqa: E731
        self._q_insert_one = Precompiled(self._q_insert, p.write_engine.dialect, INSERT_JOB_KEYS, offset)
        self._q_claim = sql.claim_sqlite(now)
        self._q_candidates: dict[tuple[int, bool], Any] = {}
        self._q_complete = sql.complete_job(now)
        self._q_recover = sql.apply_failure(now, expired_only=True)
        self._q_expired = sql.expired_leases(now, lock=True)
        self._q_progress = ops.set_progress(now)
        self._group = GroupCommit(self.insert_rows)

    def upsert(self, table: Table) -> Insert:
        return sqlite.insert(table)

    def changes_from(self) -> CTE:
        """``json_each`` of the array, one ``json_extract`` a column."""
        each = func.json_each(bindparam("changes", type_=Text())).table_valued("value")
        columns = (
            func.json_extract(each.c.value, const(f"$.{name}")).label(name) for name, _ in CHANGE_COLUMNS
        )
        return select(*columns).select_from(each).cte("chg")

    #: The events statement binds one change a run (CHANGE_COLUMNS).
    event_keys = tuple(name for name, _ in CHANGE_COLUMNS)

    def event_source(self) -> CTE:
        """One change as a row of bound parameters: the events statement
        runs as one executemany (SQLite parses no JSON for it)."""
        return select(*(bindparam(name, type_=t).label(name) for name, t in CHANGE_COLUMNS)).cte("chg")

    def event_params(self, changes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return list(changes)  # event_row gives every key

    def insert(self, rows: list[dict[str, Any]]) -> list[Job]:
        """One job without an idempotency key: written with the single-job
        enqueues of other threads that arrive meanwhile
        (store/group_commit.py; a key's conflict would fail the whole group);
        otherwise in one transaction of their own (``insert_rows``), as in an
        application's transaction (store/sql/joined.py)."""
        if len(rows) == 1 and rows[0]["idempotency_key"] is None and joined_connection(self.p) is None:
            return [self._group.insert(rows[0])]
        return self.insert_rows(rows)

    def insert_rows(self, rows: list[dict[str, Any]]) -> list[Job]:
        """``insert_in``'s work with only the statements inside the write
        transaction (so under the writer lock, store/sql/writer_lock.py): the
        JSON texts, parameters and changes are made before it, the Jobs after."""
        texts, params, changes = self._insert_parts(rows)
        stamped = self.p.tx(lambda conn: self._insert_rows(conn, params, changes))
        return new_jobs(rows, texts, stamped)

    def insert_in(self, conn: Connection, rows: list[dict[str, Any]]) -> list[Job]:
        texts, params, changes = self._insert_parts(rows)
        return new_jobs(rows, texts, self._insert_rows(conn, params, changes))

    def _insert_parts(
        self, rows: list[dict[str, Any]]
    ) -> tuple[dict[str, list[str | None]], list[dict[str, Any]], list[dict[str, Any]]]:
        """The JSON texts of ``rows``, the insert's parameters and the
        enqueue's changes for ``SqlPlumbing.book``."""
        texts = json_texts(rows)
        params = [{**r, **{c: t[i] for c, t in texts.items()}} for i, r in enumerate(rows)]
        kind = rule(Operation.ENQUEUE).event
        changes = [event_row(r["id"], kind, None, r["status"], None, 0, queue=r["queue"]) for r in rows]
        return texts, params, changes

    def _insert_rows(
        self, conn: Connection, params: list[dict[str, Any]], changes: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """Insert the rows and book their changes in ``conn``; the times the
        insert gave each job, by id."""
        if len(params) == 1:  # one job: no SQLAlchemy processing to do on it
            result = self._q_insert_one.run(conn, params)
        else:
            result = conn.execute(self._q_insert, params)
        stamped = {r["id"]: r for r in result.mappings()}
        self.p.book(conn, changes)
        return stamped

    def begin_joined(self, conn: Connection) -> None:
        """``BEGIN IMMEDIATE`` when the driver has not begun the application's
        transaction in SQLite yet (pysqlite begins at the first INSERT): a
        SAVEPOINT outside a transaction would commit at its RELEASE."""
        if not conn.connection.dbapi_connection.in_transaction:  # type: ignore[union-attr]
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    def claim(self, params: dict[str, Any], queues: int) -> list[Any]:
        """See Dialect.claim; with the parameter ``job``, that job alone."""
        key = (queues, "job" in params)

        def body(conn: Connection) -> list[Any]:  # inside BEGIN IMMEDIATE
            if key not in self._q_candidates:
                self._q_candidates[key] = sql.claim_candidates_sqlite(self.p._now, queues, one=key[1])
            old = dict(conn.execute(self._q_candidates[key], params).all())
            if not old:
                return []
            rows = conn.execute(self._q_claim, {**params, "ids": list(old)}).mappings().all()
            op = rule(Operation.CLAIM)
            to, worker = int(op.target), params["worker_id"]
            self.p.book(
                conn,
                [
                    event_row(r["id"], op.event, old[r["id"]], to, worker, r["lease_token"], queue=r["queue"])
                    for r in rows
                ],
            )
            return list(rows)

        return self.p.tx(body)

    def complete(
        self, acks: Sequence[tuple[str, int, str | None]], worker_id: str | None, return_jobs: bool
    ) -> dict[tuple[str, int], Job | None]:
        op = rule(Operation.COMPLETE)

        source, target = int(JobStatus.InProgress), int(op.target)

        def body(conn: Connection) -> dict[tuple[str, int], Job | None]:  # one statement per ack
            done: dict[tuple[str, int], Job | None] = {}
            events, outcomes = [], []
            for job_id, token, text in acks:
                params = {"j_id": job_id, "token": token, "new_result": _loads(text)}
                for r in conn.execute(self._q_complete, params).mappings():
                    done[(job_id, token)] = job_from_row(r) if return_jobs else None
                    events.append(
                        event_row(job_id, op.event, source, target, worker_id, token, queue=r["queue"])
                    )
                    outcomes.append((r["name"], r["last_updated_at"], r["started_at"], SUCCEEDED))
            self.p.book(conn, events)
            count_outcomes(conn, self.upsert(handler_minutes), outcomes, self.shard)
            return done

        return self.p.tx(body)

    def set_progress(self, reports: Sequence[tuple[str, int, dict[str, Any]]]) -> set[tuple[str, int]]:
        def body(conn: Connection) -> set[tuple[str, int]]:  # one statement per report
            written = set()
            for job_id, token, value in reports:
                params = {"j_id": job_id, "token": token, "p_value": value}
                if conn.execute(self._q_progress, params).first() is not None:
                    written.add((job_id, token))
            return written

        return self.p.tx(body)

    def expired(self, conn: Connection, limit: int) -> list[Any]:
        return list(conn.execute(self._q_expired, {"limit": limit}).mappings().all())

    def recover(self, conn: Connection, plan: Sequence[Planned], owner: str) -> set[str]:
        applied = set()
        for row, decision, error in plan:
            if self.p.apply_decision(conn, self._q_recover, row, decision, error, expired=True, actor=owner):
                applied.add(row["id"])
        return applied


def _loads(text: str | None) -> Any:
    """A result's JSON text back to a value: the JSON column encodes it again."""
    return None if text is None else orjson.loads(text)
