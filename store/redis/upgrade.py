"""``leasehold db upgrade`` for a Redis store: bring data written by earlier
layouts to this one. Run it once every process runs this version (as a SQL
migration): the previous version still reads what this removes.

What it does: the steps of ``STEPS``, in order, each idempotent, safe
while workers run, and a no-op on data that has nothing for it, so every
step runs whatever version the deployment is at:

1. ``reindex`` (store/redis/reindex.py): the listing zsets for jobs written
   before they existed, BATCH jobs a call (layout 1).
2. What layout 1 kept and later ones do not go: the InProgress
   indexes ``{P}:updated:300`` and its three listing zsets (``:queue``,
   ``:name``, ``:queue_name``; InProgress jobs are indexed by the leases
   zset alone) and the all-jobs ``{P}:updated`` zset (a listing with
   no filter merges the statuses' zsets). ``UNLINK``: the server frees them
   in the background, whatever their size.
3. ``move_records`` (store/redis/upgrade_records.py, layout 2): locks, the
   worker registry, run histories, bulk operations, schedules and failure
   windows become records of the record port.

What needs no step: jobs keep their events (a job written by the previous
layout has its enqueued and claimed events in its list and no ``enqueued_as``
or ``run`` field; lua/complete.lua appends the completed event of a job the
previous version claimed), attempts, counters, history, schedules, locks and
the unique and idempotency keys are the same keys as before; the Lua is a new
library (store/redis/scripts.py), loaded beside the previous one.
"""

from __future__ import annotations

from collections.abc import Callable

from store.lifecycle import JobStatus
from store.redis.keys import LISTING_BY
from store.redis.reindex import reindex
from store.redis.store import RedisStore
from store.redis.upgrade_records import move_records


def stale_keys(store: RedisStore) -> list[str]:
    """The previous layout's keys this one does not keep."""
    k, running = store.keys, JobStatus.InProgress
    return [k.updated(), k.updated(running), *(k.listed(running, by) for by in LISTING_BY)]


def reindex_jobs(store: RedisStore) -> dict[str, int]:
    """Step 1: ``{"indexed": jobs indexed}``."""
    return {"indexed": reindex(store)}


def drop_stale_keys(store: RedisStore) -> dict[str, int]:
    """Step 2: ``{"removed": stale keys removed}``."""
    [removed] = store._pipe(lambda p: p.unlink(*stale_keys(store)))
    return {"removed": int(removed)}


#: The upgrade's steps, in order; each takes the store and returns its counts.
STEPS: tuple[Callable[[RedisStore], dict[str, int]], ...] = (reindex_jobs, drop_stale_keys, move_records)


def upgrade(store: RedisStore) -> dict[str, int]:
    """Upgrade ``store`` in place: every step of STEPS. Returns their counts
    merged (``indexed``, ``removed``, ``records_moved``). Raises StoreUnavailable."""
    done: dict[str, int] = {}
    for step in STEPS:
        done.update(step(store))
    return done
