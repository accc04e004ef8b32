"""Writes of the SQL store in an application's open transaction.

``SqlStore.joined(connection)`` makes every transaction the store would open
in this context (``SqlPlumbing.tx``: an enqueue, its key checks, a batch)
run on ``connection`` instead, inside the transaction the application opened
on it (SQLAlchemy's ``Session.connection()``): the job, its events, counters,
history buckets, unique and idempotency keys commit with the application's
rows or vanish with its rollback. PostgreSQL's NOTIFY of an enqueue
(store/sql/wakeups.py) is sent in that transaction too, and PostgreSQL
delivers it at commit, never on rollback.

Each store call still is one atomic unit: it runs in a SAVEPOINT of the
application's transaction, so a refused value or a key taken by a concurrent
transaction undoes that call's statements alone and leaves the
application's transaction usable (PostgreSQL would otherwise abort it).
Nothing is retried (a deadlock ends the application's transaction; it
decides), and the group commit of single enqueues (store/group_commit.py)
is bypassed: its leader may be another thread with another transaction.

SQLite: the store's writer lock (store/sql/writer_lock.py) is NOT taken.
The application's connection may already hold SQLite's write lock (it wrote
its own rows first), and a store writer of this process holding the writer
lock would then wait for it in SQLite's busy handler while this thread
waited for the writer lock: a deadlock until the busy timeout. Without it,
the application's transaction is one more SQLite writer: other writers
(workers' claims and acks, other enqueues) wait in the busy handler until
it commits, so keep it short. When the application's connection has not
begun a transaction in SQLite yet (pysqlite begins lazily, at the first
INSERT), the store begins it with ``BEGIN IMMEDIATE``: a SAVEPOINT outside
a transaction would commit at its RELEASE.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from store.errors import ValidationError
from store.sql.classify import translate
from store.transactions import same_database

T = TypeVar("T")

#: The (store, connection) whose transaction this context's store calls join.
_JOINED: ContextVar[tuple[object, Connection] | None] = ContextVar("leasehold_sql_joined", default=None)


def check_joinable(store_url: str, connection: Any, field: str = "session") -> Connection:
    """``connection`` if the store at ``store_url`` can write in its
    transaction: a SQLAlchemy Connection with a transaction begun, on the
    store's database, through a driver the store's statements are built for
    (pysqlite, psycopg 3). Raises ValidationError naming ``field`` otherwise."""
    if not isinstance(connection, Connection):
        raise ValidationError(field, "needs a SQLAlchemy Session (or a Connection) of the store's database")
    if not connection.in_transaction():
        raise ValidationError(field, "has no open transaction to join")
    dialect = connection.dialect
    if dialect.name == "postgresql" and dialect.driver != "psycopg":
        raise ValidationError(
            field, f"uses the {dialect.driver} driver; the store needs psycopg 3 (postgresql+psycopg://)"
        )
    if not same_database(connection.engine.url, store_url):
        raise ValidationError(field, "is bound to another database than the store's (LEASEHOLD_STORE_URL)")
    return connection


def joined_connection(store: object) -> Connection | None:
    """The connection ``store``'s transactions join in this context, if any."""
    found = _JOINED.get()
    return found[1] if found is not None and found[0] is store else None


@contextmanager
def joining(store: object, connection: Connection) -> Iterator[None]:
    """In this context (thread, task), ``store``'s transactions run on
    ``connection`` (checked by ``check_joinable``)."""
    token = _JOINED.set((store, connection))
    try:
        yield
    finally:
        _JOINED.reset(token)


def run_joined(conn: Connection, fn: Callable[[Connection], T], begin: Callable[[Connection], None]) -> T:
    """``fn(conn)`` in a SAVEPOINT of ``conn``'s open transaction, after
    ``begin(conn)`` (the dialect's: SQLite begins the transaction in the
    database when the driver has not yet). Errors are mapped as the store's
    own transactions map them (store/sql/classify.py); the savepoint is
    rolled back first."""
    try:
        begin(conn)
        with conn.begin_nested():
            return fn(conn)
    except DBAPIError as exc:
        translated = translate(exc)
        if translated is exc:
            raise
        raise translated from exc


__all__ = ["check_joinable", "joined_connection", "joining", "run_joined"]
