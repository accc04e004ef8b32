"""The SQL half of the fixture loader (store/fixtures.py): copies of template
jobs written by one INSERT … SELECT a chunk, with their events, counters and
history buckets by the bookkeeping statements every change uses
(store/sql/bookkeeping.py), bucketed at each copy's time.

A chunk of copies is one JSON array (SQLite ``json_each``, PostgreSQL
``jsonb_to_recordset``) joined to the template rows, so a million copies are
50 statements of each kind, not a million round trips. After the load,
PostgreSQL is VACUUM ANALYZEd and checkpointed, SQLite ANALYZEd, as autovacuum
or an operator would have done by the time a store held that many jobs (the
benches measure the store, not the load's dirty pages).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import islice
from typing import Any

import orjson
from sqlalchemy import BigInteger, Double, SmallInteger, String, column, text

from store.copies import AT_FIELDS, DUE_FIELDS, LEASE_FIELDS
from store.counters import HISTORY_KINDS
from store.lifecycle import JobStatus
from store.models import Job
from store.sql import bookkeeping as bk
from store.sql.schema import counters, history, job_events, jobs
from store.sql.store import SqlStore

#: Copies a transaction.
CHUNK = 20_000
#: The keys of a copy row (store.fixtures.copy_rows) and their SQL types.
COPY_COLUMNS = (
    ("id", "text"),
    ("tid", "text"),
    ("queue", "text"),
    ("name", "text"),
    ("payload", "text"),
    ("error", "text"),
    ("at", "double precision"),
    ("due", "double precision"),
    ("lease", "double precision"),
)
_JSON_COLUMNS = ("payload", "error")
_TYPES = {"job_id": String(), "queue": String(), "kind": String(), "from_status": SmallInteger()}
_TYPES |= {"to_status": SmallInteger(), "actor": String(), "token": BigInteger(), "message": String()}
_TYPES |= {"logged": SmallInteger(), "counted": SmallInteger(), "weight": BigInteger(), "at": Double()}


def _copies_from(dialect: str) -> str:
    """The copies bound to ``:copies`` (a JSON array) as a table ``c``."""
    if dialect == "postgresql":
        cols = ", ".join(f"{name} {kind}" for name, kind in COPY_COLUMNS)
        return f"jsonb_to_recordset(CAST(:copies AS jsonb)) AS c({cols})"
    cols = ", ".join(f"json_extract(value, '$.{name}') AS {name}" for name, _ in COPY_COLUMNS)
    return f"(SELECT {cols} FROM json_each(:copies)) AS c"


def copy_jobs(dialect: str) -> str:
    """INSERT of the copies: each its template's row (``t``) but for its own
    id, queue, name, payload and error (when given) and times (a time column
    the template has NULL stays NULL)."""
    exprs = {"id": "c.id", "queue": "c.queue", "name": "c.name"}
    for name in _JSON_COLUMNS:
        value = f"CAST(c.{name} AS jsonb)" if dialect == "postgresql" else f"c.{name}"
        exprs[name] = f"COALESCE({value}, t.{name})"
    for fields, value in ((AT_FIELDS, "c.at"), (DUE_FIELDS, "c.due"), (LEASE_FIELDS, "c.lease")):
        for name in fields:
            exprs[name] = f"CASE WHEN t.{name} IS NULL THEN NULL ELSE {value} END"
    cols = [c.name for c in jobs.c]
    return (
        f"INSERT INTO {jobs.name} ({', '.join(cols)}) "
        f"SELECT {', '.join(exprs.get(c, f't.{c}') for c in cols)} "
        f"FROM {_copies_from(dialect)} JOIN {jobs.name} AS t ON t.id = c.tid"
    )


def _changes(dialect: str) -> Any:
    """The copies' changes (bookkeeping.CHANGE_COLUMNS and ``at``): each
    event of its template, for the copy's queue, at the copy's time."""
    kinds = ", ".join(f"'{k.value}'" for k in sorted(HISTORY_KINDS))
    select = (
        "SELECT c.id AS job_id, c.queue AS queue, e.kind AS kind, e.from_status AS from_status, "
        "e.to_status AS to_status, e.actor AS actor, e.token AS token, e.message AS message, "
        f"1 AS logged, CASE WHEN e.kind IN ({kinds}) THEN 1 ELSE 0 END AS counted, 1 AS weight, c.at AS at "
        f"FROM {_copies_from(dialect)} JOIN {job_events.name} AS e ON e.job_id = c.tid "
        "ORDER BY c.at, c.id, e.id"
    )
    names = [name for name, _ in bk.CHANGE_COLUMNS] + ["at"]
    return text(select).columns(*(column(n, _TYPES[n]) for n in names)).cte("chg")


def load_rows(store: SqlStore, templates: Mapping[JobStatus, Job], rows: Iterator[dict[str, Any]]) -> int:
    """Write the copy rows of store.fixtures.copy_rows, CHANGE a transaction;
    then ANALYZE (see the module docstring). Returns how many."""
    dialect = store.write_engine.dialect.name
    insert = text(copy_jobs(dialect))
    src = _changes(dialect)
    books = [
        bk.record_events(src, src.c.at),
        bk.add_to_counters(store.dialect.upsert(counters), src),
        bk.add_to_history(store.dialect.upsert(history), src, src.c.at),
    ]
    n = 0
    while chunk := list(islice(rows, CHUNK)):
        params = {"copies": orjson.dumps(chunk).decode(), "shard": store.dialect.shard}

        def write(conn: Any, params: dict[str, Any] = params) -> None:
            conn.execute(insert, params)
            for stmt in books:
                conn.execute(stmt, params)

        store.tx(write)
        n += len(chunk)
    if dialect == "postgresql":  # VACUUM runs outside a transaction block
        with store.write_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE"))
            conn.execute(text("CHECKPOINT"))
    else:  # in the store's own write transaction, which commits it (sqlite_stat1)
        store.tx(lambda conn: conn.execute(text("ANALYZE")))
    return n
