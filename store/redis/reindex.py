"""One-off rebuild of the listing zsets (``{P}:updated:<status>:queue|name|
queue_name``) for jobs written by a version that did not keep them.

``leasehold db upgrade`` runs it (store/redis/upgrade.py), once every
process runs this version.

It walks the ``{P}:updated`` zset in keyset order (no SCAN: each round starts
after the last ``(score, id)`` seen, so jobs purged meanwhile shift nothing
past it), BATCH ids at a time, and
indexes each job in lua/reindex.lua, which reads the job's current status,
queue, name and last_updated_at in the same atomic step. It is idempotent and
safe while workers run. Jobs created or changed by this version are indexed
already; a job that changes status after the upgrade re-indexes itself.
"""

from __future__ import annotations

from store.redis.listing import Entry, start_rank
from store.redis.plumbing import SCRIPT_BATCH
from store.redis.store import RedisStore

#: Job ids read from the ``updated`` zset per round (one script call each).
BATCH = SCRIPT_BATCH


def reindex(store: RedisStore) -> int:
    """Index every job of ``store`` in the listing zsets. Returns how many
    jobs were indexed. Raises StoreUnavailable when Redis is unreachable."""
    k, indexed = store.keys, 0
    after: Entry | None = None
    while True:
        start = start_rank(store._pipe, k.updated(), after, True) if after else 0
        [got] = store._pipe(lambda p, r=start: p.zrange(k.updated(), r, r + BATCH - 1, withscores=True))
        if not got:
            return indexed
        ids = [job_id for job_id, _ in got]
        indexed += int(store._eval(store._lua.reindex, store._route, store._args(*ids)))
        after = (got[-1][1], got[-1][0])
