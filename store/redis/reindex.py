"""One-off rebuild of the listing zsets (``{P}:updated:<status>:queue:<queue>``
and ``:name:<name>``, ``{P}:queue_names``) for jobs an earlier layout indexed
otherwise: layouts 1 to 3 kept every job of a status but InProgress in
``{P}:updated:<status>`` (scored in float seconds), which this layout does
not keep.

``leasehold db upgrade`` runs it (store/redis/upgrade.py), once every
process runs this version.

Each round reads BATCH members of an ``updated:<status>`` zset (``ZRANGE``,
no SCAN) and hands them to lua/reindex.lua, which reads each job's current
status, queue, name and last_updated_at in the same atomic step, indexes it
under its status unless it is gone or has moved on (then the member was
stale), and removes the member: the zset empties, so the walk ends. It is
idempotent and safe while workers run: a job changed by this version is
indexed already.
"""

from __future__ import annotations

from store.lifecycle import JobStatus
from store.redis.plumbing import SCRIPT_BATCH
from store.redis.store import RedisStore

#: Job ids read from an ``updated:<status>`` zset per round (one function call each).
BATCH = SCRIPT_BATCH


def unindexed(store: RedisStore) -> int:
    """How many members the earlier layouts' ``updated:<status>`` zsets hold."""
    statuses = [s for s in JobStatus if s is not JobStatus.InProgress]
    found = store._pipe(lambda p: [p.zcard(store.keys.updated(s)) for s in statuses])
    return sum(int(n) for n in found)


def reindex(store: RedisStore) -> int:
    """Index every job the earlier layouts' zsets hold. Returns how many jobs
    were indexed. Raises StoreUnavailable when Redis is unreachable."""
    indexed = 0
    for status in JobStatus:
        if status is not JobStatus.InProgress:  # indexed by the leases zset alone
            indexed += _reindex(store, status)
    return indexed


def _reindex(store: RedisStore, status: JobStatus) -> int:
    """Index the jobs of ``updated:<status>``, BATCH a call."""
    index, indexed = store.keys.updated(status), 0
    while True:
        [ids] = store._pipe(lambda p: p.zrange(index, 0, BATCH - 1))
        if not ids:
            return indexed
        indexed += int(store._eval(store._lua.reindex, store._route, store._args(str(int(status)), *ids)))
