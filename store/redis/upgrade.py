"""``leasehold db upgrade`` for a Redis store: bring data written by earlier
layouts to this one. Run it once every process runs this version (as a SQL
migration): the previous version still reads what this removes.

The upgrade is the steps of STEPS, each a function of the store returning
what it did (``{name: count}``, summed over the steps); each is idempotent
(a second run finds nothing left to do), independent of the others' order,
works in bounded batches or one bounded call, and is safe while workers run:

``listing_indexes`` (from layouts 1 to 4)
    ``reindex`` (store/redis/reindex.py): this layout's listing zsets, scored
    in microseconds, for every job indexed otherwise (layout 1 kept none;
    layouts 1 to 3 scored ``updated:<status>`` in seconds and kept lex zsets
    by queue, name and both), BATCH jobs a call; then what earlier layouts
    kept and this one does not go: the zsets of a status alone
    (``updated:<status>``, layouts 1 to 4), the lex zsets, layout 1's
    InProgress index ``{P}:updated:300`` and its all-jobs ``{P}:updated``
    zset. ``UNLINK``: the server frees them in the background, whatever their
    size.
``counts`` (from layouts 1 and 2)
    lua/upgrade_counts.lua, one call: the status counters go (counts are read
    from the indexes), a history kind's ``e:`` total becomes ``b:``, what it
    counted beyond the kind's per-queue totals, and each wider history width
    drops its buckets from the current one on and marks where its roll-up
    stands (store/redis/history.py).
``lease_scores`` (from layouts 1 and 2)
    the leases zset's scores from float seconds to whole microseconds
    (lib/clock.lua ``micros``): SCORE_BATCH members a call, those below
    MICROS_FROM (a score in seconds) rescored with ``ZADD XX`` (a lease the
    worker renewed or dropped meanwhile is not brought back).
``key_ready`` (from layouts 1 to 6)
    the per-key ready sets (lib/ready.lua, docs/architecture.md Flow
    control) for the ready jobs with a limit key that waited before them:
    each queue of ``queue_names``, its ready zset read BATCH members a
    call in claim order (``BYLEX`` from the last one read), each member
    checked and added in lua/upgrade_key_ready.lua; then layout 6's
    ``scan_from`` cursor goes. Until it has run (or for a job a layout-6
    process makes ready during a rolling deploy), the claim of a queue with
    per-key limits meets such a job among those without a key, admits it
    by its key's limit and moves it into its key's set (lib/flow_keyed.lua):
    the claim finds it, but not at any depth while a busy key holds the jobs
    ahead of it.
``move_records`` (store/redis/upgrade_records.py, from layout 2)
    locks, the worker registry, run histories, bulk operations, schedules and
    failure windows become records of the record port.

What needs no step: job hashes keep their fields (layout 6 leaves out of a
new job's hash its ``id``, its ``last_updated_at`` until it changes, its
``due_at`` when it has no delay, a lease holder's ``completed_by`` and a
run's ``last_heartbeat_at`` until its first heartbeat; every reader takes
them absent or present, store/redis/layout.py); jobs keep their
events (a job written by an earlier layout has its enqueued and claimed
events in its list and no ``enqueued_as`` or ``run`` field; lib/ack.lua
appends the completed event of a job an earlier version claimed),
attempts, per-queue event totals, the minute history,
schedules, locks and the unique and idempotency keys are the same keys as
before; the Lua is a new library (store/redis/scripts.py), loaded beside the
previous one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from store.counters import BEFORE_PREFIX, HISTORY_KINDS, HISTORY_WIDTHS, QUEUE_EVENT_PREFIX, STATUS_PREFIX
from store.lifecycle import JobStatus
from store.redis.keys import LEX_LISTING_BY
from store.redis.reindex import reindex, unindexed
from store.redis.store import RedisStore
from store.redis.upgrade_records import move_records

#: A step of the upgrade: what it did, by name.
Step = Callable[[RedisStore], dict[str, int]]
#: Leases rescored a call.
SCORE_BATCH = 1000
#: Ready members put into their key's set a call.
BATCH = 1000
#: Lowest lease score read as microseconds (1e12 µs is 1970-01-12; 1e12 s is far beyond any lease).
MICROS_FROM = 1e12


def stale_keys(store: RedisStore) -> list[str]:
    """Earlier layouts' listing keys this one does not keep."""
    k = store.keys
    lex = [k.lex_listed(s, by) for s in JobStatus for by in LEX_LISTING_BY]
    return [k.updated(), *(k.updated(s) for s in JobStatus), *lex]


def listing_indexes(store: RedisStore) -> dict[str, int]:
    """Jobs indexed otherwise into this layout's listing zsets, then the
    stale keys removed; nothing when none is scored in seconds and no stale
    key is left (they go last: an interrupted run reindexes again)."""
    stale = stale_keys(store)
    [left] = store._pipe(lambda p: p.exists(*stale))
    if not left and not unindexed(store):
        return {"indexed": 0, "removed": 0}
    indexed = reindex(store)
    [removed] = store._pipe(lambda p: p.unlink(*stale))
    return {"indexed": indexed, "removed": int(removed)}


def counts(store: RedisStore) -> dict[str, int]:
    """Status counters and history kinds' totals out, wide history marked."""
    kinds = " ".join(sorted(k.value for k in HISTORY_KINDS))
    wider = list(HISTORY_WIDTHS)[1:]
    args = [store._offset(), STATUS_PREFIX, QUEUE_EVENT_PREFIX, BEFORE_PREFIX, kinds, *wider]
    fields, buckets = store._eval(store._lua.upgrade_counts, store._route, args)
    return {"counters_removed": int(fields), "history_fields_moved": int(buckets)}


def lease_scores(store: RedisStore) -> dict[str, int]:
    """The leases zset's scores in seconds rescored in microseconds."""
    rescored, leases = 0, store.keys.leases
    while True:
        [got] = store._pipe(
            lambda p: p.zrangebyscore(leases, "-inf", f"({MICROS_FROM!r}", 0, SCORE_BATCH, True)
        )
        if not got:
            return {"leases_rescored": rescored}
        scores = {job_id: round(score * 1_000_000) for job_id, score in got}
        [n] = store._pipe(lambda p, s=scores: p.zadd(leases, s, xx=True, ch=True))
        rescored += int(n)


def key_ready(store: RedisStore) -> dict[str, int]:
    """Ready jobs with a limit key put into their key's ready set."""
    added = 0
    for queue in sorted(store._client.smembers(store.keys.queue_names)):
        name = queue.decode() if isinstance(queue, bytes) else queue
        ready, after = store.keys.ready(name), "-"
        while True:
            [members] = store._pipe(
                lambda p, r=ready, a=after: p.zrange(r, a, "+", bylex=True, offset=0, num=BATCH)
            )
            if not members:
                break
            texts = [m.decode() if isinstance(m, bytes) else m for m in members]
            added += int(store._eval(store._lua.upgrade_key_ready, store._route, [name, *texts]))
            after = "(" + texts[-1]
    store._pipe(lambda p: p.unlink(store.keys.route + "scan_from"))  # layout 6's cursor, read no more
    return {"keyed": added}


#: The upgrade's steps, in the order run (any order gives the same result).
STEPS: tuple[Step, ...] = (listing_indexes, counts, lease_scores, key_ready, move_records)


def upgrade(store: RedisStore) -> dict[str, int]:
    """Upgrade ``store`` in place: every step of STEPS. Returns what they
    did, summed by name (``indexed``: jobs indexed, ``removed``: stale keys
    removed, and the other steps' counts). Raises StoreUnavailable."""
    done: Counter[str] = Counter()
    for step in STEPS:
        done.update(step(store))
    return dict(done)
