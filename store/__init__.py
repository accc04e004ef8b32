"""Leasehold's job stores: the model, the lifecycle and ``open_store(url)``."""

from __future__ import annotations

from typing import Any

from leasehold.urls import DEFAULT_STORE_URL, UnknownScheme, store_kind
from store.base import JobStore, StoreSettings
from store.errors import ValidationError

__all__ = ["DEFAULT_STORE_URL", "JobStore", "StoreSettings", "open_store"]


def open_store(url: str | None = None, settings: StoreSettings | None = None, **options: Any) -> JobStore:
    """Open the store a URL names.

    ``sqlite:///path.db`` (default ``sqlite:///instance/leasehold.db``; the
    public ``leasehold.open_store`` reads ``LEASEHOLD_STORE_URL`` instead),
    ``postgresql+psycopg://user@host/db``, ``redis://host:port/db`` or
    ``redis+cluster://host:port`` (``shards=N`` in a Redis URL, N from 2:
    the sharded store, store/redis/shards/). ``options`` go to the store's constructor;
    ``engine=`` (PostgreSQL) is an application's SQLAlchemy engine of the same
    database whose pool the store uses instead of opening its own.
    The SQL schema must exist (``leasehold db upgrade`` or
    ``store.sql.migrate(url)``). Raises ValidationError for an unknown scheme.
    """
    url = url or DEFAULT_STORE_URL
    settings = settings or StoreSettings()
    try:
        kind = store_kind(url)
    except UnknownScheme as exc:
        raise ValidationError("store_url", str(exc)) from None
    if kind == "sql":
        from store.sql.store import SqlStore

        return SqlStore(url, settings, **options)
    if options.pop("engine", None) is not None:
        raise ValidationError("engine", "only a PostgreSQL store runs on an application's engine")
    from store.redis.connect import url_shards

    if url_shards(url) > 1:
        from store.redis.shards.sharded_store import ShardedRedisStore

        return ShardedRedisStore(url, settings, **options)
    from store.redis.store import RedisStore

    return RedisStore(url, settings, **options)
