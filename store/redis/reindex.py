"""One-off rebuild of the listing zsets (``{P}:updated:<status>:queue|name|
queue_name``) for jobs written by a version that did not keep them.

``leasehold db upgrade`` runs it (store/redis/upgrade.py), once every
process runs this version.

It walks each status's ``{P}:updated:<status>`` zset (but InProgress's, whose
jobs have no listing zsets) in keyset order (no SCAN: each round starts after
the last ``(score, id)`` seen, so jobs purged meanwhile shift nothing past
it), BATCH ids at a time, and
indexes each job in lua/reindex.lua, which reads the job's current status,
queue, name and last_updated_at in the same atomic step. It is idempotent and
safe while workers run. Jobs created or changed by this version are indexed
already; a job that changes status after the upgrade re-indexes itself.
"""

from __future__ import annotations

from store.lifecycle import JobStatus
from store.redis.listing import start_rank
from store.redis.plumbing import SCRIPT_BATCH
from store.redis.store import RedisStore

#: Job ids read from an ``updated:<status>`` zset per round (one function call each).
BATCH = SCRIPT_BATCH


def reindex(store: RedisStore) -> int:
    """Index every job of ``store`` in the listing zsets. Returns how many
    jobs were indexed. Raises StoreUnavailable when Redis is unreachable."""
    indexed = 0
    for status in JobStatus:
        if status is not JobStatus.InProgress:  # indexed by the leases zset alone
            indexed += _reindex(store, store.keys.updated(status))
    return indexed


def _reindex(store: RedisStore, index: str) -> int:
    """Index the jobs of one ``updated:<status>`` zset, BATCH a call."""
    indexed, after = 0, None
    while True:
        start = start_rank(store._pipe, index, after, True) if after else 0
        [got] = store._pipe(lambda p, r=start: p.zrange(index, r, r + BATCH - 1, withscores=True))
        if not got:
            return indexed
        ids = [job_id for job_id, _ in got]
        indexed += int(store._eval(store._lua.reindex, store._route, store._args(*ids)))
        after = (got[-1][1], got[-1][0])
