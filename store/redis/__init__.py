"""Redis store: a hash per job, sorted-set indexes, one Lua script per state
change (``lua/``), all keys of a deployment under one hash tag (Redis Cluster
ready). ``keys.py`` documents the key schema; ``store.RedisStore`` is the store."""

from __future__ import annotations

from store.redis.store import RedisStore

__all__ = ["RedisStore"]
