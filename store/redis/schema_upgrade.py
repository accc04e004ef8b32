"""The Redis store's schema upgrade (``leasehold db upgrade``, reached
through ``store.schema_version.upgrade_schema``): each namespace's key layout brought to
this release's (``store.redis.layout``), and with ``shards`` an unsharded
namespace moved onto its shards (``store.redis.shards.reshard``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from leasehold.urls import public_url
from store import open_store
from store.errors import SchemaMismatch, SchemaUpgradeFailed
from store.redis.connect import url_shards, with_shards
from store.redis.layout import LAYOUT_VERSION, UPGRADABLE, current_layout, layout_key
from store.redis.plumbing import Shard
from store.redis.shards.reshard import MOVED_LAYOUT, Reshard, ReshardRefused
from store.redis.store import RedisStore
from store.redis.upgrade import upgrade


def upgrade_redis(url: str, shards: int | None, progress: Callable[[str], None] | None = None) -> str:
    """``store.schema_version.upgrade_schema`` of a Redis URL: every
    namespace's (each shard's) key layout, then the move of an unsharded
    namespace onto the shards; the one line saying what was done."""
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


def upgrade_layout(store: Any) -> dict[str, int]:
    """Move a deployment of an UPGRADABLE version to LAYOUT_VERSION (bounded
    batches, safe while workers run: store/redis/upgrade.py), then stamp it.
    Returns what ``upgrade`` did."""
    done = upgrade(store)
    store._client.set(layout_key(store), LAYOUT_VERSION)
    return done
