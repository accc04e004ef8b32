"""Engines for the SQL store: SQLite tuned for many processes, PostgreSQL pooled.

SQLite: WAL journal, a busy timeout, and ``BEGIN IMMEDIATE`` for every write
transaction, so writers queue on the database lock at BEGIN instead of failing
with "database is locked" when a read transaction tries to upgrade (SQLAlchemy
docs, "Serializable isolation / Savepoints / Transactional DDL" for pysqlite);
the store takes ``Engines.writer`` around each (store/sql/writer_lock.py), so
that they queue without the busy handler's sleeps.
Reads use a second engine whose transactions begin DEFERRED.

PostgreSQL: with a schema (``LEASEHOLD_PG_SCHEMA``) every connection starts
with ``search_path`` set to that schema alone (the ``options`` startup
parameter), so the unqualified table names of the statements resolve there
and nothing else in the database is seen. ``store.sql.upgrade`` creates the
schema; the store does not.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

import orjson
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url

from store.errors import ValidationError
from store.pg_schema import PG_SCHEMA_ENV, resolve_pg_schema
from store.sql.writer_lock import WriterLock
from store.transactions import same_database

#: How long a SQLite writer waits for the database lock, milliseconds.
SQLITE_BUSY_TIMEOUT_MS = 60_000
#: The environment variable of psycopg's connect timeout (whole seconds, 1-300; default 5).
PG_CONNECT_TIMEOUT_ENV = "LEASEHOLD_PG_CONNECT_TIMEOUT"
PG_CONNECT_TIMEOUT_S = 5
#: The environment variable of the PostgreSQL statement timeout of reads
#: (seconds, > 0 and at most 3600; default 5).
PG_STATEMENT_TIMEOUT_ENV = "LEASEHOLD_PG_STATEMENT_TIMEOUT"
PG_STATEMENT_TIMEOUT_S = 5.0
MAX_PG_STATEMENT_TIMEOUT_S = 3600.0


def pg_connect_timeout_s(raw: str | None = None) -> int:
    """Seconds psycopg waits for a connection: ``raw``, else
    ``LEASEHOLD_PG_CONNECT_TIMEOUT``, else 5. Raises ValidationError naming
    the variable unless it is a whole number within [1, 300]."""
    raw = os.environ.get(PG_CONNECT_TIMEOUT_ENV, "") if raw is None else raw
    if not raw.strip():
        return PG_CONNECT_TIMEOUT_S
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if not 1 <= value <= 300:
        raise ValidationError(PG_CONNECT_TIMEOUT_ENV, f"must be whole seconds within [1, 300], got {raw!r}")
    return value


def pg_statement_timeout_s(raw: str | None = None) -> float:
    """Seconds a PostgreSQL read may run before the server cancels it:
    ``raw``, else ``LEASEHOLD_PG_STATEMENT_TIMEOUT``, else 5. Raises
    ValidationError naming the variable unless it is a number of seconds
    within (0, 3600] (at least 1 ms: PostgreSQL counts milliseconds)."""
    raw = os.environ.get(PG_STATEMENT_TIMEOUT_ENV, "") if raw is None else raw
    if not raw.strip():
        return PG_STATEMENT_TIMEOUT_S
    try:
        value = float(raw.strip())
    except ValueError:
        value = 0.0
    if not 0.001 <= value <= MAX_PG_STATEMENT_TIMEOUT_S:
        raise ValidationError(
            PG_STATEMENT_TIMEOUT_ENV,
            f"must be seconds within [0.001, {MAX_PG_STATEMENT_TIMEOUT_S:g}], got {raw!r}",
        )
    return value


class Engines(NamedTuple):
    """The engines of one SQL store handle.

    write: transactions of changes (SQLite: ``BEGIN IMMEDIATE``).
    read: reads (SQLite: ``BEGIN`` deferred; PostgreSQL: autocommit, every
        statement cut by the server after the statement timeout).
    dialect: ``sqlite`` or ``postgresql``.
    single: a change that is one statement atomic on its own (PostgreSQL:
        autocommit with no statement timeout, so a worker's claim or ack is
        never cut; SQLite: the write engine).
    writer: SQLite: the lock every write transaction takes first
        (store/sql/writer_lock.py); PostgreSQL: None.
    """

    write: Engine
    read: Engine
    dialect: str
    single: Engine
    writer: WriterLock | None = None


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


def _pg_connect_args(
    url: URL, schema: str | None, statement_timeout_s: float | None = None
) -> dict[str, Any]:
    """psycopg's connect arguments: the connect timeout (s), the schema's
    search_path and the sessions' statement timeout (s; None: the server's)."""
    args: dict[str, Any] = {"connect_timeout": pg_connect_timeout_s()}
    startup = []
    if schema is not None:
        startup.append(f"-csearch_path={schema}")
    if statement_timeout_s is not None:
        startup.append(f"-cstatement_timeout={max(1, round(statement_timeout_s * 1000))}")
    if startup:
        # Keep any startup options of the URL (?options=...): connect_args replace them.
        given = url.query.get("options")
        given = " ".join(given) if isinstance(given, tuple) else given
        args["options"] = " ".join(filter(None, [given, *startup]))
    return args


def make_engines(
    url: str,
    pool_size: int = 5,
    pg_schema: str | None = None,
    statement_timeout_s: float | None = None,
    engine: Engine | None = None,
) -> Engines:
    """The ``Engines`` of a SQLAlchemy URL.

    For SQLite the file's folder must exist (a mistyped path is refused,
    not created); the two engines differ in how they begin transactions.
    For PostgreSQL they are three pools of up to
    ``2 * pool_size`` connections each (a pool opens connections only when
    used), the read and single engines' in autocommit (each statement its own
    transaction: under READ COMMITTED a read sees what a transaction would),
    every session in the schema ``resolve_pg_schema(pg_schema)`` (None: the
    ``LEASEHOLD_PG_SCHEMA`` variable; ``""``: none); SQLite ignores it. The
    read engine's sessions run with ``statement_timeout`` =
    ``statement_timeout_s`` (None: ``pg_statement_timeout_s()``).
    With ``engine`` (an application's, PostgreSQL only), the store's engines
    are that engine and its pool (``engines_on``).
    Raises ValidationError for a URL that is neither SQLite nor PostgreSQL,
    for a missing SQLite folder, or for a bad schema name or timeout.
    """
    if engine is not None:
        return engines_on(engine, url, pg_schema)
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.database in (None, "", ":memory:"):
            raise ValidationError("store_url", "SQLite needs a file path (sqlite:///path.db)")
        folder = Path(parsed.database).parent
        if not folder.is_dir():
            raise ValidationError(
                "store_url",
                f"the folder of the SQLite file, {folder.resolve()}, does not exist (create it, or fix the "
                "path)",
            )
        write = _sqlite_engine(url, True)
        return Engines(write, _sqlite_engine(url, False), "sqlite", write, WriterLock(parsed.database))
    if backend == "postgresql":
        schema = resolve_pg_schema(pg_schema)
        timeout_s = pg_statement_timeout_s() if statement_timeout_s is None else statement_timeout_s
        options: dict[str, Any] = {
            "json_serializer": _json_dumps,
            "json_deserializer": orjson.loads,
            "pool_size": pool_size,
            "max_overflow": pool_size,
            "connect_args": _pg_connect_args(parsed, schema),
        }
        timed = {**options, "connect_args": _pg_connect_args(parsed, schema, timeout_s)}
        # Reads and one-statement changes: connections that stay in autocommit
        # (no BEGIN/COMMIT round trips, no isolation level switched on every
        # checkout and back on every return, ~40 us of client CPU a call).
        write, read, single = (
            create_engine(url, **options),
            create_engine(url, isolation_level="AUTOCOMMIT", **timed),
            create_engine(url, isolation_level="AUTOCOMMIT", **options),
        )
        _share_disconnects(write, read, single)
        return Engines(write, read, backend, single)
    raise ValidationError("store_url", f"unsupported SQL backend {backend!r}")


def engines_on(engine: Engine, url: str, pg_schema: str | None = None) -> Engines:
    """The ``Engines`` of a store on an application's PostgreSQL engine
    (Flask-SQLAlchemy's ``db.engine``): one pool, the application's. Writes
    use ``engine`` as it is; reads and one-statement changes an
    ``execution_options`` copy of it in autocommit (SQLAlchemy sets the
    level on checkout and restores it on return), with no statement timeout
    (LEASEHOLD_PG_STATEMENT_TIMEOUT is a connect option of the store's own
    pools). The application's JSON serialiser decodes the JSON columns.

    Raises ValidationError (field ``engine``) unless ``engine`` is a
    PostgreSQL engine of psycopg 3 on the database of ``url``, and when a
    schema (``pg_schema``, else LEASEHOLD_PG_SCHEMA) is set: the tables'
    ``search_path`` is a connect option of the store's own pools. SQLite is
    refused too: the store's connections begin ``BEGIN IMMEDIATE`` and
    decode top-level JSON numbers, which an application's engine does not,
    and a SQLite file has no server connections to save."""
    dialect = engine.dialect
    if dialect.name != "postgresql" or dialect.driver != "psycopg":
        raise ValidationError(
            "engine",
            f"a store shares a PostgreSQL engine of psycopg 3 only, not {dialect.name}+{dialect.driver}",
        )
    if not same_database(engine.url, url):
        raise ValidationError("engine", "is an engine of another database than the store URL's")
    if resolve_pg_schema(pg_schema) is not None:
        raise ValidationError("engine", f"{PG_SCHEMA_ENV} is set: the store needs its own engines for it")
    auto = engine.execution_options(isolation_level="AUTOCOMMIT")
    return Engines(engine, auto, "postgresql", auto)


def _share_disconnects(*engines: Engine) -> None:
    """A disconnect on one engine empties the other engines' pools too
    (``Engine.dispose``: idle connections closed, checked-out ones dropped on
    return). The engines talk to one server: after a restart or terminated
    sessions, their idle connections are as dead as the one that failed, and
    SQLAlchemy recycles only the pool that saw the error."""
    for engine in engines:
        others = [other for other in engines if other is not engine]

        def on_error(context: Any, others: list[Engine] = others) -> None:
            if context.is_disconnect:
                for other in others:
                    other.dispose()

        event.listen(engine, "handle_error", on_error)
