"""The Redis store's "schema": the version of its key layout.

Redis has no DDL to run, so an empty deployment is ready as it stands. What
can be wrong is data written by a release with another key layout. The
version lives in ``{P}:layout`` (a string): ``leasehold db upgrade`` writes it,
and so does the first check of an empty deployment. A deployment whose
version differs from LAYOUT_VERSION is refused until ``db upgrade`` moves it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from store.errors import StoreUnavailable

#: The key layout this release reads and writes (bump it when keys change shape).
#: 7: every ready job with a limit key is also in its key's ready set
#: (``key_ready``, ``key_heads``, ``keyed``: store/redis/keys.py), which the
#: claim of a queue with per-key limits reads; ``scan_from`` is no longer read.
#: 6: a job hash leaves out what its key or another field says: ``id`` (the
#: key's), ``last_updated_at`` until the job first changes (``created_at``),
#: ``due_at`` of a job with no delay (``created_at``), ``completed_by`` when
#: the lease holder acked (``worker_id``), ``last_heartbeat_at`` until the
#: run's first heartbeat (``started_at``: the later of the two is read); a
#: claim's reply entry carries the id (store/redis/codec.py ``claim_entry``),
#: a claimed job keeps its ``rank`` (no longer in a ready zset) and an ended
#: lease its ``lease_expires_at`` (read only while InProgress). A release
#: of layout 5 would read such a hash wrongly, hence the version; this one
#: reads both.
#: 5: no listing zset of a status alone (``updated:<status>``): a status's
#: zsets by queue serve its listings, counts and purges.
#: 4: listing zsets scored in microseconds, member the id, by status, status x
#: queue and status x name (no lex zsets; ``queue_names``: store/redis/keys.py).
#: 3: counts from the indexes (no status counters, no history kinds' ``e:``
#: totals, hours rolled up from minutes), lease scores in microseconds, and
#: records of the record port (``rec:<kind>:<key>``, store/redis/records.py).
#: 2: the Functions library's (no all-jobs ``updated`` zset; InProgress jobs
#: listed through ``leases``). 1: the layout before it, which kept no version
#: key and is told by its all-jobs ``{P}:updated`` zset.
LAYOUT_VERSION = "7"
#: Versions ``leasehold db upgrade`` moves to LAYOUT_VERSION (store/redis/upgrade.py).
UPGRADABLE = ("1", "2", "3", "4", "5", "6")


def layout_key(store: Any) -> str:
    """``{P}:layout`` of the store's deployment."""
    return store.keys._key("layout")


def current_layout(store: Any, stamp: bool = True) -> tuple[str | None, bool]:
    """``(version, written)``: the deployment's layout version; with ``stamp``
    an absent one is written as LAYOUT_VERSION first (``written`` True)."""
    client = store._client
    key = layout_key(store)
    found = client.get(key)
    if found is None:
        if client.exists(store.keys.updated()):  # version 1 data: it kept no version key
            return "1", False
        if stamp and client.set(key, LAYOUT_VERSION, nx=True):
            return LAYOUT_VERSION, True
        found = client.get(key)
    return (found.decode() if isinstance(found, bytes) else found), False


def layout_revision(namespaces: Sequence[Any]) -> tuple[str | None, str]:
    """``(found, expected)`` layout versions of a store's ``namespaces`` (one,
    or each shard's; an absent version written first): the first that
    differs from LAYOUT_VERSION is the one found. Raises StoreUnavailable
    when Redis cannot be reached."""
    try:
        found = [current_layout(namespace)[0] for namespace in namespaces]
    except redis.RedisError as exc:
        raise StoreUnavailable(f"Redis store unavailable: {exc}") from exc
    return next((f for f in found if f != LAYOUT_VERSION), LAYOUT_VERSION), LAYOUT_VERSION
