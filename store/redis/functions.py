"""The Redis store's Functions library on a client (docs/architecture.md,
The Redis store): loaded on demand, called, and its stale versions unloaded.
The library's text is ``scripts.py``'s.

``Scripts.load`` makes one callable per function for a client: an FCALL, and
on the first "function not found" (a new server, a FUNCTION FLUSH, a new
version) one FUNCTION LOAD and the call again. A server without FCALL (Redis
older than 7.0) raises StoreUnavailable with one line saying so. On a
cluster the library goes to every primary that answers: one primary down
(its shard is down, docs/architecture.md, Shards) leaves the others'
calls working, and it gets the library at its first call once it is back.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, fields
from typing import Any

from redis import exceptions as rx
from redis.cluster import RedisCluster

from store.errors import StoreUnavailable
from store.redis.connect import UNAVAILABLE
from store.redis.scripts import library

log = logging.getLogger(__name__)

#: A library of ours: ``leasehold_`` and its ``version``.
OUR_LIBRARY = re.compile(r"leasehold_[0-9a-f]{12}")
#: Seconds after its last load before a library of another version is
#: unloaded by a new one's load. A process of that version that still runs
#: loads it again at its next call ("function not found"), and that load
#: counts as its last: two versions side by side (a rolling deploy) never
#: unload each other more than once an hour.
LIBRARY_GRACE_S = 3600.0


class Library:
    """The library on one client: loaded on demand, once per server.
    ``registry``: the zset key (store/redis/keys.py ``libraries``) of the
    libraries this namespace loaded, scored by their last load (server
    time), or None to keep no account and unload nothing."""

    def __init__(
        self, client: Any, registry: str | None = None, built: tuple[str, str] | None = None
    ) -> None:
        """``built``: ``(name, code)`` of another library than the store's
        (``build_library``); default ``library()``."""
        self.client = client
        self.registry = registry
        self.name, self.code = built or library()

    def load(self) -> None:
        """FUNCTION LOAD, unless a library of this name (so this content) is
        there already; after a load, the namespace's libraries of other
        versions last loaded more than LIBRARY_GRACE_S ago are unloaded
        (``unload_stale``). On a cluster, a primary that does not answer is
        skipped with a warning. Raises StoreUnavailable on a server without
        Functions, and redis-py's connection error when no primary answers."""
        loaded = False
        down: list[Exception] = []
        nodes = self._nodes()
        for node in nodes:
            try:
                self._on(node, "FUNCTION LOAD", self.code)
                loaded = True
            except rx.ResponseError as exc:
                if "already exists" in str(exc):
                    continue
                if "unknown command" in str(exc).lower():
                    raise StoreUnavailable(self._too_old()) from None
                raise
            except UNAVAILABLE as exc:
                if node is None:
                    raise
                log.warning(
                    "library %s not loaded on %s, which does not answer: %s", self.name, node.name, exc
                )
                down.append(exc)
        if down and len(down) == len(nodes):
            raise down[-1]
        if loaded:
            try:
                self.unload_stale()
            except UNAVAILABLE as exc:  # housekeeping: the next load tries again
                log.warning("unloading the stale libraries failed: %s", exc)

    def _nodes(self) -> list[Any]:
        """Each primary of a cluster (a command to all of them through
        redis-py stops at the first node's error, so a library another
        process loaded on one node would leave the rest without it); one
        ``None`` for a single server."""
        if isinstance(self.client, RedisCluster):
            return list(self.client.get_primaries())
        return [None]

    def _on(self, node: Any, *command: Any) -> Any:
        if node is None:
            return self.client.execute_command(*command)
        return self.client.execute_command(*command, target_nodes=node)

    def unload_stale(self) -> list[str]:
        """Record this library's load and unload (FUNCTION DELETE, on every
        primary of a cluster) the registry's other libraries last loaded
        more than LIBRARY_GRACE_S ago: about 135 KB of server memory each,
        which a deploy a day would otherwise pile up. A library that a
        primary which does not answer may still hold stays in the registry,
        and a later load unloads it. Returns the names unloaded everywhere."""
        if self.registry is None:
            return []
        now = self._now()
        self.client.zadd(self.registry, {self.name: now})
        stale = self.client.zrangebyscore(self.registry, "-inf", now - LIBRARY_GRACE_S)
        gone = []
        for name in stale:
            name = name.decode() if isinstance(name, bytes) else name
            if name == self.name or not OUR_LIBRARY.fullmatch(name):
                continue
            everywhere = True
            for node in self._nodes():
                try:
                    self._on(node, "FUNCTION DELETE", name)
                except rx.ResponseError as exc:  # gone already (another process, a node without it)
                    if "not found" not in str(exc).lower():
                        raise
                except UNAVAILABLE:
                    if node is None:
                        raise
                    everywhere = False
            if everywhere:
                self.client.zrem(self.registry, name)
                gone.append(name)
        return gone

    def _now(self) -> float:
        """The server's clock, seconds (TIME; on a cluster, the registry's
        primary's: it answers whenever the registry does)."""
        if isinstance(self.client, RedisCluster):
            node = self.client.get_node_from_key(self.registry)
            seconds, micros = self.client.execute_command("TIME", target_nodes=node)
        else:
            seconds, micros = self.client.time()
        return float(seconds) + float(micros) / 1e6

    def _too_old(self) -> str:
        try:
            version = self.client.info("server").get("redis_version", "?")
        except rx.RedisError:
            version = "?"
        return (
            f"Redis server {version} has no Redis Functions: Leasehold's Redis store needs "
            "Redis >= 7.0 or Valkey"
        )


@dataclass(frozen=True, slots=True)
class Function:
    """One function of the library, called as ``fn(keys=[...], args=[...])``."""

    library: Library
    name: str

    def __call__(self, keys: list[str], args: list[Any], client: Any = None) -> Any:
        """FCALL on ``client`` (default: the library's), loading the library
        first when the server has not got it (a restart, FUNCTION FLUSH)."""
        client = client or self.library.client
        try:
            return client.fcall(self.name, len(keys), *keys, *args)
        except rx.ResponseError as exc:
            text = str(exc)
            if "unknown command" in text.lower():
                raise StoreUnavailable(self.library._too_old()) from None
            if "function not found" not in text.lower():
                raise
        self.library.load()
        return client.fcall(self.name, len(keys), *keys, *args)


@dataclass(frozen=True, slots=True)
class Scripts:
    """Every function of the library on one client; field name = file name."""

    now: Function
    enqueue: Function
    claim: Function
    heartbeat: Function
    progress: Function
    complete: Function
    complete_claim: Function
    apply_failures: Function
    release: Function
    cancel: Function
    requeue: Function
    record_events: Function
    expired_leases: Function
    purge_candidates: Function
    purge: Function
    purge_count: Function
    trim_history: Function
    history: Function
    counts: Function
    delete: Function
    queue_state: Function
    audit: Function
    audit_migrate: Function
    reindex: Function
    enqueue_flow: Function
    flow_limits: Function
    flow_usage: Function
    cancel_batch: Function
    upgrade_counts: Function
    upgrade_key_ready: Function
    record_change: Function
    record_hold: Function
    record_prune: Function
    idle: Function
    job_fields: Function
    link_children: Function
    parent_done: Function
    shard_key: Function

    @classmethod
    def load(cls, client: Any, registry: str | None = None) -> Scripts:
        """The functions on ``client`` (Redis or RedisCluster); the library is
        loaded by the first call that finds it missing (``registry``: see Library)."""
        library = Library(client, registry)
        return cls(**{f.name: Function(library, f"{library.name}_{f.name}") for f in fields(cls)})
