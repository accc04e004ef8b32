"""Whether a store holds the schema this release expects, and the one line
that says what to do when it does not.

SQL stores: the Alembic revision in ``leasehold_alembic_version`` against the
head of the migrations (``store.sql.revision``). Redis: the key layout's
version (``store.redis.layout``). Commands, workers and the web app check at
start, so a missing or old schema is one line naming ``leasehold db upgrade``,
not a traceback from the first query.
"""

from __future__ import annotations

import re
import sys

from store.base import JobStore
from store.errors import StoreError, StoreUnavailable

#: What the refusal tells the operator to run.
UPGRADE_HINT = "run leasehold db upgrade"


class SchemaMismatch(StoreError):
    """The store has no Leasehold schema, or one at another revision."""

    def __init__(self, where: str, found: str | None, expected: str) -> None:
        what = "no Leasehold schema" if found is None else f"revision {found}, expected {expected}"
        super().__init__(f"{where} has {what}: {UPGRADE_HINT}")
        self.where, self.found, self.expected = where, found, expected


def public_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages)."""
    return re.sub(r"(//[^/@:]*:)[^/@]*@", r"\1***@", url)


def schema_revision(store: JobStore) -> tuple[str | None, str]:
    """``(found, expected)`` revisions of ``store`` (SQL: Alembic revisions;
    Redis: layout versions, an absent one written first). Raises
    StoreUnavailable when the store cannot be reached."""
    # By module: checking a SQLite store loads no Redis client, and back.
    sql_store, redis_store = sys.modules.get("store.sql.store"), sys.modules.get("store.redis.store")
    if sql_store is not None and isinstance(store, sql_store.SqlStore):
        from sqlalchemy.exc import DBAPIError

        from store.sql.revision import current_revision, head_revision

        try:
            return current_revision(store.read_engine), head_revision()
        except DBAPIError as exc:
            raise StoreUnavailable(f"SQL store unavailable: {exc.orig}") from exc
    if redis_store is not None and isinstance(store, redis_store.RedisStore):
        import redis

        from store.redis.layout import LAYOUT_VERSION, current_layout

        try:
            return current_layout(store)[0], LAYOUT_VERSION
        except redis.RedisError as exc:
            raise StoreUnavailable(f"Redis store unavailable: {exc}") from exc
    raise TypeError(f"no schema check for {type(store).__name__}")


def check_schema(store: JobStore, url: str | None = None) -> None:
    """Raise SchemaMismatch (one line naming ``leasehold db upgrade``) when
    ``store`` lacks the expected schema; StoreUnavailable when unreachable."""
    found, expected = schema_revision(store)
    if found != expected:
        where = public_url(url or getattr(store, "url", "the store"))
        raise SchemaMismatch(where, found, expected)


__all__ = ["UPGRADE_HINT", "SchemaMismatch", "check_schema", "public_url", "schema_revision"]
