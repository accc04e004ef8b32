"""Sharing an application's database: stores that write in its transactions,
and the names that keep Leasehold's tables out of its migrations.

A store that can (the SQL store: store/sql/joined.py) has ``joined``; code
above the stores asks ``isinstance(store, JoinsTransactions)`` and never
imports the SQL store to find out. A store that cannot (Redis) is written
to after the application's transaction commits instead (workers/sessions.py).
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class JoinsTransactions(Protocol):
    """A store whose calls can run in an application's open transaction."""

    def joined(self, connection: Any) -> AbstractContextManager[None]:
        """Within the block, this thread's store calls write on
        ``connection`` (a SQLAlchemy Connection of the store's database) in
        its open transaction. Raises ValidationError (field ``session``) for
        a connection the store cannot join."""
        ...


def same_database(a: Any, b: Any) -> bool:
    """True when two SQLAlchemy URLs name one database: the same SQLite file
    (paths resolved), or the same PostgreSQL host, port and database (user,
    password and driver may differ). ``a`` and ``b``: URL strings or
    SQLAlchemy URLs."""
    from sqlalchemy.engine import make_url  # here: a Redis process need not load SQLAlchemy

    ua, ub = make_url(a), make_url(b)
    backend = ua.get_backend_name()
    if backend != ub.get_backend_name():
        return False
    if backend == "sqlite":
        return bool(ua.database) and os.path.realpath(ua.database or "") == os.path.realpath(
            ub.database or ""
        )
    return (ua.host or "localhost", ua.port or 5432, ua.database) == (
        ub.host or "localhost",
        ub.port or 5432,
        ub.database,
    )


#: What every table, index, constraint and the Alembic version table of the
#: SQL store is named with (store/sql/schema.py): an application's own names
#: must not start with it.
TABLE_PREFIX = "leasehold_"


def host_tables_only(name: str | None, type_: str, parent_names: dict[str, Any]) -> bool:
    """Alembic's ``include_name`` hook for an application's migrations that
    share the database with Leasehold: False for Leasehold's tables (and
    their columns, indexes and constraints, and its version table), so the
    application's autogenerate neither drops nor alters them::

        Migrate(app, db, include_name=host_tables_only)        # Flask-Migrate
        context.configure(..., include_name=host_tables_only)  # a plain env.py
    """
    table = name if type_ == "table" else parent_names.get("table_name")
    return not (table or "").startswith(TABLE_PREFIX)


__all__ = ["TABLE_PREFIX", "JoinsTransactions", "host_tables_only", "same_database"]
