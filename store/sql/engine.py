"""Engines for the SQL store: SQLite tuned for many processes, PostgreSQL pooled.

SQLite: WAL journal, a busy timeout, and ``BEGIN IMMEDIATE`` for every write
transaction, so writers queue on the database lock at BEGIN instead of failing
with "database is locked" when a read transaction tries to upgrade (SQLAlchemy
docs, "Serializable isolation / Savepoints / Transactional DDL" for pysqlite).
Reads use a second engine whose transactions begin DEFERRED.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

from store.errors import ValidationError

#: How long a SQLite writer waits for the database lock, milliseconds.
SQLITE_BUSY_TIMEOUT_MS = 60_000


def _json_dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def _sqlite_json_loads(value: Any) -> Any:
    # SQLite gives a JSON column NUMERIC affinity: a top-level number is stored
    # and returned as a number, not as JSON text.
    return orjson.loads(value) if isinstance(value, str | bytes) else value


def _sqlite_engine(url: str, immediate: bool) -> Engine:
    engine = create_engine(
        url,
        json_serializer=_json_dumps,
        json_deserializer=_sqlite_json_loads,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def make_engines(url: str, pool_size: int = 5) -> tuple[Engine, Engine, str]:
    """Return ``(write_engine, read_engine, dialect_name)`` for a SQLAlchemy URL.

    For SQLite the file's folder is created; the two engines differ in how
    they begin transactions. For PostgreSQL both are the same pooled engine.
    Raises ValidationError for a URL that is neither SQLite nor PostgreSQL.
    """
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.database in (None, "", ":memory:"):
            raise ValidationError("store_url", "SQLite needs a file path (sqlite:///path.db)")
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        return _sqlite_engine(url, True), _sqlite_engine(url, False), "sqlite"
    if backend == "postgresql":
        engine = create_engine(
            url,
            json_serializer=_json_dumps,
            json_deserializer=orjson.loads,
            pool_size=pool_size,
            max_overflow=pool_size,
            connect_args={"connect_timeout": int(os.environ.get("LEASEHOLD_PG_CONNECT_TIMEOUT", "5"))},
        )
        return engine, engine, "postgresql"
    raise ValidationError("store_url", f"unsupported SQL backend {backend!r}")
