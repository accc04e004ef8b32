"""Whether a store holds the schema this release expects, the one line that
says what to do when it does not, and the upgrade.

The check asks the store (``JobStore.schema_revision``, store/contract_schema.py):
SQL stores compare the Alembic revision in ``leasehold_alembic_version`` with
the head of the migrations, Redis the key layout's version. Commands, workers
and the web app check at start, so a missing or old schema is one line
naming ``leasehold db upgrade``, not a traceback from the first query. The
upgrade runs before a store can be opened, so it is reached by the URL's
kind: ``store.sql.upgrade`` or ``store.redis.schema_upgrade``. Nothing above
``store/`` imports an engine's package: this module is their one door.
"""

from __future__ import annotations

from collections.abc import Callable

from leasehold.urls import public_url, store_kind
from store.base import JobStore
from store.errors import UPGRADE_HINT, SchemaMismatch, SchemaUpgradeFailed


def check_schema(store: JobStore, url: str | None = None) -> None:
    """Raise SchemaMismatch (one line naming ``leasehold db upgrade``) when
    ``store`` lacks the expected schema; StoreUnavailable when unreachable."""
    found, expected = store.schema_revision()
    if found != expected:
        where = public_url(url or getattr(store, "url", "the store"))
        raise SchemaMismatch(where, found, expected)


def upgrade_schema(url: str, shards: int | None = None, progress: Callable[[str], None] | None = None) -> str:
    """Bring the store at ``url`` to this release's schema (SQL: Alembic's
    migrations to head (the SQLite file's folder must exist), creating the PostgreSQL
    schema; Redis: the key layout's upgrade steps) and return the one line
    that says what was done: created at, upgraded from … to, or already at.
    ``shards`` (Redis only; or ``shards=N`` in the URL): split the namespace
    into that many shards, moving what an unsharded namespace of the same
    prefix holds onto them (store/redis/shards/reshard.py); ``progress``
    gets a line now and then while it moves. Raises SchemaUpgradeFailed
    (one line) when it fails or cannot be done, ValidationError for a bad
    URL or shard count."""
    if store_kind(url) == "sql":
        if shards is not None:
            raise SchemaUpgradeFailed("--shards splits a Redis store; this store is SQL")
        from store.sql.upgrade import upgrade_sql

        return upgrade_sql(url)
    from store.redis.schema_upgrade import upgrade_redis

    return upgrade_redis(url, shards, progress)


__all__ = [
    "UPGRADE_HINT",
    "SchemaMismatch",
    "SchemaUpgradeFailed",
    "check_schema",
    "public_url",
    "upgrade_schema",
]
