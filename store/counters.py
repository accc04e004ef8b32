"""Counter keys, the one place their format is written in Python.

Every store keeps running totals in a key/value form (a Redis hash, a SQL
table of sharded rows): ``s:<status code>:<queue>`` is the number of jobs of
a queue in a status, ``e:<event kind>`` the number of events of a kind ever
appended, and ``q:<event kind>:<queue>`` the number of events of a kind of
HISTORY_KINDS ever appended for a queue's jobs (the monotonic twin of the
history buckets, for Prometheus). The Lua twin is
``status_counter``/``event_counter``/``queue_event_counter`` in
``store/redis/lua/lib/job.lua``; the SQL stores build the same text in SQL,
in their one bookkeeping path (``store/sql/bookkeeping.py``).
``tests/store/test_redis_lua_static.py`` checks that the Lua and Python keys
agree; the SQL statements are exercised by the contract suite, whose counts
must match on every store.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from store.lifecycle import EventKind, JobStatus

#: Event kinds the history graphs count per queue and time bucket.
HISTORY_KINDS: frozenset[EventKind] = frozenset(
    {
        EventKind.ENQUEUED,
        EventKind.COMPLETED,
        EventKind.FAILED,
        EventKind.RETRY_SCHEDULED,
        EventKind.LEASE_EXPIRED,
    }
)
#: History bucket widths, seconds, each with how long its buckets are kept
#: (seconds): per minute for 48 h, per hour for 30 days.
HISTORY_WIDTHS: dict[int, float] = {60: 48 * 3600.0, 3600: 30 * 86400.0}
#: The width every store writes (the narrowest); the wider ones are its roll-ups.
NARROW = min(HISTORY_WIDTHS)

STATUS_PREFIX = "s:"
EVENT_PREFIX = "e:"
QUEUE_EVENT_PREFIX = "q:"
#: ``b:<kind>``: a Redis store upgraded from key layout 2 keeps here the events
#: of a HISTORY_KINDS kind counted before its ``q:`` totals existed (the kind's
#: total is this plus the sum of its ``q:`` totals: store/redis/history.py).
BEFORE_PREFIX = "b:"
#: ``r:<width>``: where a SQL store's roll-up of a wider history width stands
#: (the first bucket start not rolled up yet, epoch seconds, as ``n`` of shard
#: 0); the Redis store keeps it in ``{P}:history_rolled:<width>``.
ROLLED_PREFIX = "r:"


def status_key(status: JobStatus | int, queue: str) -> str:
    """``s:300:default``: jobs of ``queue`` in ``status``."""
    return f"{STATUS_PREFIX}{int(status)}:{queue}"


def event_key(kind: EventKind | str) -> str:
    """``e:completed``: events of ``kind`` ever appended."""
    return f"{EVENT_PREFIX}{kind}"


def queue_event_key(kind: EventKind | str, queue: str) -> str:
    """``q:completed:default``: events of ``kind`` (one of HISTORY_KINDS) ever
    appended for jobs of ``queue``."""
    return f"{QUEUE_EVENT_PREFIX}{kind}:{queue}"


def queue_event_totals(rows: Iterable[tuple[str, int | str]]) -> dict[tuple[str, str], int]:
    """Totals by ``(queue, event kind)`` from ``(key, n)`` counter rows (other keys skipped)."""
    n = len(QUEUE_EVENT_PREFIX)
    out = {}
    for key, value in rows:
        if key.startswith(QUEUE_EVENT_PREFIX):
            kind, _, queue = key[n:].partition(":")
            out[(queue, kind)] = int(value)
    return out


def rolled_key(width_s: int) -> str:
    """``r:3600``: the roll-up mark of the history width ``width_s``."""
    return f"{ROLLED_PREFIX}{width_s}"


def parse_status_key(key: str) -> tuple[JobStatus, str] | None:
    """``(status, queue)`` of a status key; None for any other key."""
    if not key.startswith(STATUS_PREFIX):
        return None
    code, _, queue = key[len(STATUS_PREFIX) :].partition(":")
    return JobStatus(int(code)), queue


def derived_event_totals(rows: Iterable[tuple[str, int | str]]) -> dict[str, int]:
    """Totals by event kind, as every store counts them: an event of
    HISTORY_KINDS naming its queue is counted in ``q:<kind>:<queue>`` only
    (the total is the sum of the queues', not a write of its own), so a
    kind's total is ``e:<kind>`` plus every ``q:<kind>:…`` of the kind
    (other keys skipped)."""
    rows = list(rows)
    totals = Counter(event_totals(rows))
    for (_, kind), n in queue_event_totals(rows).items():
        totals[kind] += n
    return dict(totals)


def event_totals(rows: Iterable[tuple[str, int | str]]) -> dict[str, int]:
    """Totals by event kind from ``(key, n)`` counter rows (other keys skipped)."""
    n = len(EVENT_PREFIX)
    return {key[n:]: int(value) for key, value in rows if key.startswith(EVENT_PREFIX)}


def moved(queue: str, old: JobStatus | int | None, new: JobStatus | int) -> Counter[str]:
    """Deltas of one job of ``queue`` moving from ``old`` (None: a new job) to ``new``."""
    deltas: Counter[str] = Counter({status_key(new, queue): 1})
    if old is not None:
        deltas[status_key(old, queue)] -= 1
    return deltas


# ------------------------------------------------------------------ roll-up
# Where a wider history width's buckets come from, on every store
# (docs/architecture.md, Stores): only NARROW is written. Each wider width
# has a roll-up mark, a bucket start of its own: its buckets before the mark
# hold the sums of their narrow buckets (trim_history rolls a wide bucket up
# once it has ended and moves the mark past it, in one atomic unit), and
# its buckets from the mark on are the sums of their narrow buckets at read
# time. No mark yet: every wide bucket is summed at read time. A narrow
# bucket is dropped only once past its retention and before every mark. So
# history(width, since) of a wider width reads its own buckets with a start
# in [since, mark) and the narrow buckets from read_from(since, width, mark)
# on, each counted in the wide bucket that holds it (bucket_of). The Redis
# twin is lua/trim_history.lua and lua/history.lua.


def bucket_of(start: float, width_s: int) -> float:
    """The start (epoch seconds) of the ``width_s`` bucket that holds time ``start``."""
    return float(start // width_s * width_s)


def read_from(since: float, width_s: int, mark: float | None) -> float:
    """The first narrow bucket start a read of wider width ``width_s`` from
    ``since`` sums at read time: the first ``width_s`` bucket start at or
    after ``since`` (a wide bucket starting before ``since`` is not read),
    or the roll-up ``mark`` (None: none) if later."""
    first = -(-since // width_s) * width_s
    return float(first if mark is None else max(first, mark))


def roll_span(
    mark: float | None, oldest: float | None, until: float, width_s: int, batch: int
) -> tuple[float, float]:
    """The wide buckets ``[start, end)`` (epoch seconds) the next roll-up of
    width ``width_s`` takes: from the ``mark`` (None: from the bucket of the
    ``oldest`` narrow bucket, or from ``until``'s bucket when there is none)
    up to ``until``'s bucket, which has not ended, and at most ``batch``
    buckets. ``start == end``: nothing to roll up; ``end`` is the next mark."""
    current = bucket_of(until, width_s)
    if mark is not None:
        start = float(mark)
    else:
        start = current if oldest is None else min(bucket_of(oldest, width_s), current)
    return start, max(start, min(current, start + batch * width_s))
