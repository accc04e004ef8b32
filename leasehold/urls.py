"""Store URLs: the one place that reads a URL's scheme to pick an engine.

``sqlite:///path.db``, ``postgresql+psycopg://user@host/db`` (any SQLAlchemy
PostgreSQL driver), ``redis://``, ``rediss://``, ``unix://`` (a Redis socket),
``redis+cluster://`` and ``rediss+cluster://``. Imports nothing of Leasehold,
so every floor may use it.
"""

from __future__ import annotations

import re
from typing import Literal

#: The store Leasehold opens when no URL is configured (a file under ./instance).
DEFAULT_STORE_URL = "sqlite:///instance/leasehold.db"

StoreKind = Literal["sql", "redis"]

SQL_SCHEMES = ("sqlite", "postgresql")  # prefixes: sqlite+pysqlite, postgresql+psycopg, …
REDIS_SCHEMES = ("redis", "rediss", "redis+cluster", "rediss+cluster", "unix")


class UnknownScheme(ValueError):
    """The URL names no engine Leasehold has; the message lists the ones it has."""


def scheme_of(url: str) -> str:
    """The URL's scheme, lower case (``postgresql+psycopg`` for ``postgresql+psycopg://…``)."""
    return url.split(":", 1)[0].lower()


def store_kind(url: str) -> StoreKind:
    """``"sql"`` or ``"redis"`` for ``url``. Raises UnknownScheme for any other scheme."""
    scheme = scheme_of(url)
    if scheme.startswith(SQL_SCHEMES):
        return "sql"
    if scheme in REDIS_SCHEMES:
        return "redis"
    raise UnknownScheme(
        f"unknown store URL scheme {scheme!r}; use sqlite:///…, postgresql+psycopg://…, redis://… "
        "or redis+cluster://…"
    )


def is_sql(url: str) -> bool:
    """True for a SQLite or PostgreSQL URL (False for Redis; UnknownScheme for neither)."""
    return store_kind(url) == "sql"


def public_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages)."""
    return re.sub(r"(//[^/@:]*:)[^/@]*@", r"\1***@", url)
