"""The sharded Redis store (docs/architecture.md, Shards; the engine is
``sharded_store.py``): the routing every part of it shares. A job's shard is
its queue's (``shard_of_queue``); shard k's keys carry the hash tag
``{prefix:k}`` (``shard_prefix``)."""

from __future__ import annotations

from zlib import crc32


def shard_of_queue(queue: str, shards: int) -> int:
    """The shard (0 to ``shards`` - 1) of a queue's jobs: CRC-32 of the
    queue's UTF-8 name modulo ``shards``, the same in every process and
    release (Python's ``hash`` of a str is salted per process)."""
    return crc32(queue.encode()) % shards


def shard_prefix(prefix: str, shard: int) -> str:
    """The prefix of shard ``shard``'s namespace, ``prefix:shard``: its keys
    start ``{prefix:shard}:`` (store/redis/keys.py), one hash tag a shard."""
    return f"{prefix}:{shard}"
