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

STATUS_PREFIX = "s:"
EVENT_PREFIX = "e:"
QUEUE_EVENT_PREFIX = "q:"
#: ``b:<kind>``: a Redis store upgraded from key layout 2 keeps here the events
#: of a HISTORY_KINDS kind counted before its ``q:`` totals existed (the kind's
#: total is this plus the sum of its ``q:`` totals: store/redis/history.py).
BEFORE_PREFIX = "b:"


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
