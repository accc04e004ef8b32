"""``list_jobs`` of the Redis store (a mixin of RedisStore; SharedStore checks
the limit and order and turns ``before`` into a reversed read): exact keyset
pages at any depth, whatever the filter.

Without a queue or name filter the index is ``{P}:updated:<status>``: score
last_updated_at, member id. Redis orders equal scores by member, so
``ZRANGE … REV`` yields ``(last_updated_at, id)`` descending, the order of
the SQL store. A cursor ``(at, id)`` is turned into a start rank with
``ZCOUNT (at +inf`` plus the members tied at ``at`` that sort at or after
``id``: O(log N) plus the tie group. With no status either, the statuses'
indexes are read the same way (one round trip for their start ranks, one
for their ranges) and merged here.

With a queue and/or name filter the indexes are the lex zsets
``{P}:updated:<status>:queue|name|queue_name`` (keys.py), kept by the scripts
that change a job (lua/lib/job.lua ``move``): every member of one queue/name
starts with the same prefix and then sorts by ``(last_updated_at µs, id)``, so
a BYLEX range after the cursor's member is exactly the next page, O(log N +
limit). With no status the six statuses' ranges are read in one round trip
and merged here (each at most ``limit + 1`` entries). No entry that does not
match is ever read, so a rare name under millions of other jobs costs the
same as a common one.

InProgress jobs have none of these indexes (lua/lib/job.lua ``LEASED``):
their index is the leases zset, whose members are exactly the jobs in
flight. A listing of InProgress reads it whole, then the queue, name and
last_updated_at of each (one pipelined HMGET), and filters, orders and pages
here: a cost bounded by the jobs in flight, not by the store's size.

Cost of a page: one round trip for the index range(s) (two with a cursor on
the score indexes, or on InProgress), one for the ``limit`` job hashes.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from itertools import islice
from typing import Any

from store.cursor import decode_cursor, encode_cursor
from store.lifecycle import JobStatus
from store.models import Job, Page
from store.redis.codec import job_from_hash
from store.redis.keys import Keys
from store.redis.plumbing import RedisPlumbing

#: Runs commands queued on a pipeline by the callable; returns their replies.
Pipe = Callable[[Callable[[Any], object]], list[Any]]
#: Digits of the microsecond stamp in a lex member (lua/lib/job.lua ``list_job``).
STAMP_DIGITS = 17
#: An index entry: (last_updated_at, job id); sorts as the listing does.
Entry = tuple[float, str]


def stamp(at: float) -> str:
    """``at`` (epoch seconds) as the scripts write it in a lex member: the
    same double arithmetic as lua/lib/job.lua, so the text is identical."""
    return f"{math.floor(at * 1_000_000 + 0.5):0{STAMP_DIGITS}d}"


def lex_source(keys: Keys, status: JobStatus, queue: str | None, name: str | None) -> tuple[str, str]:
    """The lex zset and member prefix of the jobs of ``status`` in ``queue``
    and/or named ``name`` (at least one given)."""
    if queue is not None and name is not None:
        return keys.listed(status, "queue_name"), f"{queue}\0{name}\0"
    if queue is not None:
        return keys.listed(status, "queue"), f"{queue}\0"
    return keys.listed(status, "name"), f"{name}\0"


def _lex_range(p: Any, index: str, prefix: str, after: Entry | None, count: int, ascending: bool) -> None:
    """Queue the next ``count`` members of ``prefix`` after ``after`` on ``p``."""
    low, high = f"[{prefix}", f"({prefix}:"  # ':' sorts after every stamp digit
    if after is not None:
        bound = f"({prefix}{stamp(after[0])}:{after[1]}"
        low, high = (bound, high) if ascending else (low, bound)
    if ascending:
        p.zrangebylex(index, low, high, start=0, num=count)
    else:
        p.zrevrangebylex(index, high, low, start=0, num=count)


def _lex_entry(prefix: str, member: str) -> Entry:
    rest = member[len(prefix) :]
    return int(rest[:STAMP_DIGITS]) / 1_000_000, rest[STAMP_DIGITS + 1 :]


def _after(entry: Entry, after: Entry | None, ascending: bool) -> bool:
    """Whether ``entry`` comes after the cursor ``after`` in the page order."""
    return after is None or (entry > after if ascending else entry < after)


def start_ranks(pipe: Pipe, indexes: list[str], after: Entry, ascending: bool) -> list[int]:
    """Rank (0-based, in the page order) of the first entry after ``after``
    in each of ``indexes`` (one round trip)."""
    at, after_id = after
    below, above = ("-inf", f"({at!r}") if ascending else (f"({at!r}", "+inf")
    replies = pipe(lambda p: [(p.zcount(i, below, above), p.zrangebyscore(i, at, at)) for i in indexes])
    ranks = []
    for n, ties in zip(replies[::2], replies[1::2], strict=True):
        ranks.append(n + sum(1 for m in ties if (m <= after_id if ascending else m >= after_id)))
    return ranks


def start_rank(pipe: Pipe, index: str, after: Entry, ascending: bool) -> int:
    """Rank (0-based, in the page order) of the first entry after ``after``."""
    return start_ranks(pipe, [index], after, ascending)[0]


def _merged(runs: list[list[Entry]], count: int, ascending: bool) -> list[Entry]:
    """The first ``count`` entries of ``runs`` (each in the page order), merged."""
    if len(runs) == 1:
        return runs[0]
    merged = heapq.merge(*runs, reverse=not ascending)
    seen: set[str] = set()  # a job moved between two reads shows once
    return list(islice((e for e in merged if not (e[1] in seen or seen.add(e[1]))), count))


class ListingMixin(RedisPlumbing):
    """The engine half of ``list_jobs``."""

    def _entries(
        self,
        status: JobStatus | None,
        queue: str | None,
        name: str | None,
        count: int,
        after: Entry | None,
        ascending: bool,
    ) -> list[Entry]:
        """The next ``count`` index entries after ``after`` in the page order."""
        keys, pipe = self.keys, self._pipe
        if status is JobStatus.InProgress:
            return self._leased(queue, name, after, ascending)[:count]
        if queue is None and name is None:
            statuses = [status] if status else [s for s in JobStatus if s is not JobStatus.InProgress]
            indexes = [keys.updated(s) for s in statuses]
            ranks = start_ranks(pipe, indexes, after, ascending) if after else [0] * len(indexes)
            got = pipe(
                lambda p: [
                    p.zrange(i, r, r + count - 1, desc=not ascending, withscores=True)
                    for i, r in zip(indexes, ranks, strict=True)
                ]
            )
            runs = [[(score, job_id) for job_id, score in run] for run in got]
            if status is None:
                runs.append(self._leased(None, None, after, ascending)[:count])
            return _merged(runs, count, ascending)
        statuses = [status] if status else [s for s in JobStatus if s is not JobStatus.InProgress]
        sources = [lex_source(keys, s, queue, name) for s in statuses]
        replies = pipe(lambda p: [_lex_range(p, i, pre, after, count, ascending) for i, pre in sources])
        runs = [[_lex_entry(pre, m) for m in got] for (_, pre), got in zip(sources, replies, strict=True)]
        if status is None:
            runs.append(self._leased(queue, name, after, ascending)[:count])
        return _merged(runs, count, ascending)

    def _leased(
        self, queue: str | None, name: str | None, after: Entry | None, ascending: bool
    ) -> list[Entry]:
        """Every InProgress job of ``queue`` and/or named ``name`` (None: any)
        after ``after``, in the page order: the leases zset's members, each
        one's queue, name and last_updated_at read (two round trips; jobs
        that left InProgress between the reads are dropped). ``at`` is
        rounded to the microsecond, as the lex indexes hold it."""
        [ids] = self._pipe(lambda p: p.zrange(self.keys.leases, 0, -1))
        fields = ("status", "queue", "name", "last_updated_at")
        rows = self._pipe(lambda p: [p.hmget(self.keys.job(job_id), fields) for job_id in ids])
        entries = []
        for job_id, (code, q, n, at) in zip(ids, rows, strict=True):
            if code != str(int(JobStatus.InProgress)) or at is None:
                continue
            if (queue is None or q == queue) and (name is None or n == name):
                entry = (int(stamp(float(at))) / 1_000_000, job_id)
                if _after(entry, after, ascending):
                    entries.append(entry)
        entries.sort(reverse=not ascending)
        return entries

    def count_jobs(self, status: JobStatus, *, queue: str | None = None, name: str | None = None) -> int:
        """See OperatingContract.count_jobs: one index read, not counts() of
        every queue and status: ZCARD of ``updated:<status>`` (the leases
        zset for InProgress) without a filter, else ``_count_named``."""
        status = JobStatus(status)
        if queue or name:
            return self._count_named(status, queue or None, name or None)
        index = self.keys.leases if status is JobStatus.InProgress else self.keys.updated(status)
        [n] = self._pipe(lambda p: p.zcard(index))
        return int(n)

    def _count_named(self, status: JobStatus, queue: str | None, name: str | None) -> int:
        """ZLEXCOUNT of the queue's, name's (or queue and name's) members in
        the listing zset of ``status``; for InProgress, the count of ``_leased``."""
        if status is JobStatus.InProgress:
            return len(self._leased(queue, name, None, True))
        index, prefix = lex_source(self.keys, status, queue, name)
        [n] = self._pipe(lambda p: p.zlexcount(index, f"[{prefix}", f"({prefix}:"))
        return int(n)

    def _list(
        self,
        status: JobStatus | None,
        queue: str | None,
        name: str | None,
        limit: int,
        cursor: str | None,
        ascending: bool,
    ) -> Page:
        """One page of at most ``limit`` jobs, newest update first, or oldest
        first when ``ascending`` (see the module docstring); ``prev_cursor`` is
        the first item's key when a cursor was given. Raises ValidationError
        for a bad cursor."""
        after = decode_cursor(cursor) if cursor else None
        entries = self._entries(status, queue, name, limit + 1, after, ascending)
        hashes = self._pipe(lambda p: [p.hgetall(self.keys.job(job_id)) for _, job_id in entries[:limit]])
        items: list[Job] = []
        for fields in hashes:
            if not fields:
                continue  # deleted since the index was read
            job = job_from_hash(fields)
            if (
                (status is None or job.status is status)
                and (queue is None or job.queue == queue)
                and (name is None or job.name == name)
            ):
                items.append(job)  # else: changed since the index was read
        more = len(entries) > limit
        first = encode_cursor(*entries[0]) if cursor and entries else None
        return Page(items, encode_cursor(*entries[limit - 1]) if more else None, first)
