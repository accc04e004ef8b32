"""Whether a store holds the schema this release expects, and the one line
that says what to do when it does not.

SQL stores: the Alembic revision in ``leasehold_alembic_version`` against the
head of the migrations (``store.sql.revision``). Redis: the key layout's
version (``store.redis.layout``). Commands, workers and the web app check at
start, so a missing or old schema is one line naming ``leasehold db upgrade``,
not a traceback from the first query.

This module is the one door to each engine's schema: the check
(``check_schema``) and the upgrade (``upgrade_schema``) are reached through
it, so nothing above ``store/`` imports an engine's package, and a new
engine changes nothing above ``store/``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

from store.base import JobStore
from store.errors import StoreError, StoreUnavailable

#: What the refusal tells the operator to run.
UPGRADE_HINT = "run leasehold db upgrade"


class SchemaMismatch(StoreError):
    """The store has no Leasehold schema, or one at another revision."""

    def __init__(self, where: str, found: str | None, expected: str) -> None:
        what = "no Leasehold schema" if found is None else f"revision {found}, expected {expected}"
        if found is not None and found.startswith("sharded:"):  # store/redis/shards/reshard.py
            count = found.partition(":")[2]
            message = f"{where} was moved onto {count} shards: add shards={count} to the store URL"
        else:
            message = f"{where} has {what}: {UPGRADE_HINT}"
        super().__init__(message)
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
    shards = getattr(store, "shards", None)  # a sharded store: every shard's layout
    if redis_store is not None and isinstance((shards or [store])[0], redis_store.RedisStore):
        import redis

        from store.redis.layout import LAYOUT_VERSION, current_layout

        try:
            found = [current_layout(s)[0] for s in (shards or [store])]
        except redis.RedisError as exc:
            raise StoreUnavailable(f"Redis store unavailable: {exc}") from exc
        return next((f for f in found if f != LAYOUT_VERSION), LAYOUT_VERSION), LAYOUT_VERSION
    raise TypeError(f"no schema check for {type(store).__name__}")


def check_schema(store: JobStore, url: str | None = None) -> None:
    """Raise SchemaMismatch (one line naming ``leasehold db upgrade``) when
    ``store`` lacks the expected schema; StoreUnavailable when unreachable."""
    found, expected = schema_revision(store)
    if found != expected:
        where = public_url(url or getattr(store, "url", "the store"))
        raise SchemaMismatch(where, found, expected)


class SchemaUpgradeFailed(StoreError):
    """``upgrade_schema`` could not bring the store to this release's schema;
    the message is the one line to show."""


def upgrade_schema(url: str, shards: int | None = None, progress: Callable[[str], None] | None = None) -> str:
    """Bring the store at ``url`` to this release's schema (SQL: Alembic's
    migrations to head, creating the SQLite file's folder and the PostgreSQL
    schema; Redis: the key layout's upgrade steps) and return the one line
    that says what was done: created at, upgraded from … to, or already at.
    ``shards`` (Redis only; or ``shards=N`` in the URL): split the namespace
    into that many shards, moving what an unsharded namespace of the same
    prefix holds onto them (store/redis/shards/reshard.py). Raises
    SchemaUpgradeFailed (one line) when it fails or cannot be done,
    ValidationError for a bad URL or shard count."""
    from leasehold.urls import store_kind

    if store_kind(url) == "sql":
        if shards is not None:
            raise SchemaUpgradeFailed("--shards splits a Redis store; this store is SQL")
        return _upgrade_sql(url)
    return _upgrade_redis(url, shards, progress)


def _upgrade_sql(url: str) -> str:
    from sqlalchemy.exc import SQLAlchemyError

    from store.sql.engine import make_engines
    from store.sql.revision import current_revision, head_revision
    from store.sql.upgrade import migrate

    try:
        engines = make_engines(url, pool_size=1)
        try:
            before = current_revision(engines.read)
        finally:
            for engine in {engines.write, engines.read, engines.single}:
                engine.dispose()
        migrate(url)
    except SQLAlchemyError as exc:
        reason = " ".join(str(getattr(exc, "orig", None) or exc).split())
        raise SchemaUpgradeFailed(f"schema upgrade failed: {reason}") from None
    head = head_revision()
    if before is None:
        return f"created the schema at revision {head}"
    if before != head:
        return f"upgraded the schema from revision {before} to {head}"
    return f"the schema is already at revision {head}"


def _upgrade_redis(url: str, shards: int | None, progress: Callable[[str], None] | None = None) -> str:
    from store import open_store
    from store.redis.connect import url_shards, with_shards

    if shards is not None:
        given = url_shards(url)
        if given > 1 and given != shards:
            raise SchemaUpgradeFailed(f"the store URL says shards={given}, not {shards}")
        url = with_shards(url, shards)
    with open_store(url) as store:
        every = getattr(store, "shards", None)  # a sharded store (store/redis/shards/): each shard
        lines = [_upgrade_namespace(url, s) for s in (every or [store])]
        if every is None:
            return lines[0]
        line = "; ".join(dict.fromkeys(lines)) + f" (each of {len(every)} shards)"
        moved = _move_unsharded(url, store, progress)
    return line if moved is None else f"{line}; {moved}"


def _move_unsharded(url: str, store: Any, progress: Callable[[str], None] | None = None) -> str | None:
    """Move the unsharded namespace of the sharded store's prefix onto its
    shards (store/redis/shards/reshard.py): the line saying so, or None when
    there is nothing to move. Raises SchemaUpgradeFailed (one line) when the
    move is refused (what to stop first) or its namespace's layout is unknown."""
    from store.redis.layout import LAYOUT_VERSION, UPGRADABLE, current_layout
    from store.redis.plumbing import Shard
    from store.redis.shards.reshard import MOVED_LAYOUT, Reshard, ReshardRefused
    from store.redis.store import RedisStore

    source = RedisStore(url, store.settings, shard=Shard(store.records._client, store.prefix, 0))
    move = Reshard(source, store)
    count = len(store.shards)
    if not move.has_keys():
        return None
    found, _ = current_layout(source)  # keys without a stamp: this release's (layout.py)
    if found == MOVED_LAYOUT.format(count):
        return None
    if found in UPGRADABLE:
        _upgrade_namespace(url, source)
    elif found != LAYOUT_VERSION:
        raise SchemaUpgradeFailed(
            f"{public_url(url)}: the unsharded namespace {store.prefix!r} has key layout {found}; "
            f"this release moves version {LAYOUT_VERSION} onto shards"
        )
    try:
        done = move.run(progress or (lambda line: None))
    except ReshardRefused as exc:
        raise SchemaUpgradeFailed(f"{public_url(url)}: not moved onto {count} shards: {exc}") from None
    return (
        f"moved the unsharded namespace {store.prefix!r} onto {count} shards ({done.jobs} jobs, "
        f"{done.keys} keys); open it with shards={count} in the store URL"
    )


def _upgrade_namespace(url: str, store: Any) -> str:
    from store.redis.layout import LAYOUT_VERSION, UPGRADABLE, current_layout, upgrade_layout

    found, written = current_layout(store)
    if found in UPGRADABLE:
        done = upgrade_layout(store)
        return (
            f"upgraded the key layout from version {found} to {LAYOUT_VERSION} "
            f"({done['indexed']} jobs indexed, {done['removed']} old indexes removed, "
            f"{done['records_moved']} records moved)"
        )
    if written:
        return f"created the key layout at version {LAYOUT_VERSION}"
    if found == LAYOUT_VERSION:
        return f"the key layout is already at version {LAYOUT_VERSION}"
    if found is not None and found.startswith("sharded:"):  # moved (store/redis/shards/reshard.py)
        raise SchemaUpgradeFailed(str(SchemaMismatch(public_url(url), found, LAYOUT_VERSION)))
    raise SchemaUpgradeFailed(
        f"{public_url(url)} has key layout version {found}; this release reads version "
        f"{LAYOUT_VERSION} and has no upgrade from {found}"
    )


__all__ = [
    "UPGRADE_HINT",
    "SchemaMismatch",
    "SchemaUpgradeFailed",
    "check_schema",
    "public_url",
    "schema_revision",
    "upgrade_schema",
]
