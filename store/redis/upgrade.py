"""``leasehold db upgrade`` for a Redis store: bring data written by earlier
layouts to this one. Run it once every process runs this version (as a SQL
migration): the previous version still reads what this removes.

What it does, each step idempotent and safe while workers run:

1. ``reindex`` (store/redis/reindex.py): the listing zsets for jobs written
   before they existed, BATCH jobs a call.
2. What the previous layout kept and this one does not go: the InProgress
   indexes ``{P}:updated:300`` and its three listing zsets (``:queue``,
   ``:name``, ``:queue_name``; this layout indexes InProgress jobs by the
   leases zset alone) and the all-jobs ``{P}:updated`` zset (a listing with
   no filter merges the statuses' zsets). ``UNLINK``: the server frees them
   in the background, whatever their size.

What needs no step: jobs keep their events (a job written by the previous
layout has its enqueued and claimed events in its list and no ``enqueued_as``
or ``run`` field; lua/complete.lua appends the completed event of a job the
previous version claimed), attempts, counters, history, schedules, locks and
the unique and idempotency keys are the same keys as before; the Lua is a new
library (store/redis/scripts.py), loaded beside the previous one.
"""

from __future__ import annotations

from store.lifecycle import JobStatus
from store.redis.keys import LISTING_BY
from store.redis.reindex import reindex
from store.redis.store import RedisStore


def stale_keys(store: RedisStore) -> list[str]:
    """The previous layout's keys this one does not keep."""
    k, running = store.keys, JobStatus.InProgress
    return [k.updated(), k.updated(running), *(k.listed(running, by) for by in LISTING_BY)]


def upgrade(store: RedisStore) -> dict[str, int]:
    """Upgrade ``store`` in place. Returns ``{"indexed": jobs indexed,
    "removed": stale keys removed}``. Raises StoreUnavailable."""
    indexed = reindex(store)
    [removed] = store._pipe(lambda p: p.unlink(*stale_keys(store)))
    return {"indexed": indexed, "removed": int(removed)}
