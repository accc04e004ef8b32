"""One-off rebuild of the listing zsets (``{P}:updated:<status>:queue:<queue>``
and ``:name:<name>``, ``{P}:queue_names``) for jobs written by a layout that
indexed them otherwise: layout 1 kept no listing zsets, layouts 1 to 3
scored ``updated:<status>`` (a status alone, which this layout does not
keep) in float seconds.

``leasehold db upgrade`` runs it (store/redis/upgrade.py), once every
process runs this version.

In those layouts every job of a status but InProgress is in
``{P}:updated:<status>``; a job not indexed by this layout yet has a score
in seconds, below MICROS_FROM. Each round reads BATCH such members
(``ZRANGEBYSCORE``, no SCAN) and indexes them in lua/reindex.lua, which
reads each job's current status, queue, name and last_updated_at in the
same atomic step and writes its entries in microseconds unless the job is
gone or has another status, and drops the member: it leaves the range
read, so the walk ends (store/redis/upgrade.py removes the zsets after). It is
idempotent and safe while workers run: a job changed by this version is
indexed already.
"""

from __future__ import annotations

from store.lifecycle import JobStatus
from store.redis.plumbing import SCRIPT_BATCH
from store.redis.store import RedisStore

#: Job ids read from an ``updated:<status>`` zset per round (one function call each).
BATCH = SCRIPT_BATCH
#: Lowest listing score read as microseconds (1e12 µs is 1970-01-12; 1e12 s is far beyond any job).
MICROS_FROM = 1e12


def unindexed(store: RedisStore) -> int:
    """How many members of the ``updated:<status>`` zsets are scored in seconds."""
    statuses = [s for s in JobStatus if s is not JobStatus.InProgress]
    found = store._pipe(
        lambda p: [p.zcount(store.keys.updated(s), "-inf", f"({MICROS_FROM!r}") for s in statuses]
    )
    return sum(int(n) for n in found)


def reindex(store: RedisStore) -> int:
    """Index every job of ``store`` not indexed by this layout. Returns how
    many jobs were indexed. Raises StoreUnavailable when Redis is unreachable."""
    indexed = 0
    for status in JobStatus:
        if status is not JobStatus.InProgress:  # indexed by the leases zset alone
            indexed += _reindex(store, status)
    return indexed


def _reindex(store: RedisStore, status: JobStatus) -> int:
    """Index the jobs of ``updated:<status>`` scored in seconds, BATCH a call."""
    index, indexed = store.keys.updated(status), 0
    while True:
        [ids] = store._pipe(lambda p: p.zrangebyscore(index, "-inf", f"({MICROS_FROM!r}", 0, BATCH))
        if not ids:
            return indexed
        indexed += int(store._eval(store._lua.reindex, store._route, store._args(str(int(status)), *ids)))
