"""``list_jobs`` of the Redis store (a mixin of RedisStore; SharedStore checks
the limit and order and turns ``before`` into a reversed read): exact keyset
pages at any depth, whatever the filter.

Every listing index is a zset scored by last_updated_at in whole
microseconds with the job id as member (lua/lib/listing.lua ``list_job``):
``updated:<status>:queue:<queue>`` with a queue, ``updated:<status>:name:<name>``
with a name, and without a filter the status's zsets of every queue of
``{P}:queue_names``, read alike and merged (there is no zset of a status
alone: the writes it cost every status change bought nothing these do not
give). Several zsets merged into one page are read a share each, then more
only from those that may hold the page's entries (``_read_merged``): about
a page's entries are read, in a round trip or two more per page than from
one zset, and one start rank per queue with a cursor. Redis orders
equal scores by member, so ``ZRANGE … REV`` yields ``(last_updated_at, id)``
descending, the order of the SQL store. A cursor ``(at, id)`` is turned into
a start rank with ``ZCOUNT`` of the scores past ``at`` plus the members tied
at ``at`` that sort at or after ``id``: O(log N) plus the tie group. With no
status, the statuses' indexes are read the same way (one round trip for
their start ranks, one for their ranges) and merged here.

A queue and a name together are their two zsets' intersection: the smaller
one is walked from the cursor in chunks (doubling up to CHUNK_MOST), each
chunk's members looked up in the other with one ``ZMSCORE``, until the page
is full or the walk ends. It stays exact; its cost is bounded by the
smaller zset's entries newer than the page, not by the store's size. Its
count is ``ZINTERCARD``.

InProgress jobs have none of these indexes (lua/lib/listing.lua ``LEASED``):
their index is the leases zset, whose members are exactly the jobs in
flight. A listing of InProgress reads it whole, then the queue, name and
last_updated_at of each (one pipelined HMGET), and filters, orders and pages
here: a cost bounded by the jobs in flight, not by the store's size.

Cost of a page: a round trip for the index range(s) (one more with a
cursor, or on InProgress, and one a refill round of a merge), one for the
``limit`` job hashes.
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
from store.parts import Part
from store.redis.codec import job_from_hash

#: Runs commands queued on a pipeline by the callable; returns their replies.
Pipe = Callable[[Callable[[Any], object]], list[Any]]
#: Digits of the microsecond stamp (lua/lib/clock.lua ``micros``) of a listing score.
STAMP_DIGITS = 17
#: An index entry: (last_updated_at, job id); sorts as the listing does.
Entry = tuple[float, str]
#: Most members one chunk of an intersection walk reads (``_both``).
CHUNK_MOST = 4096
#: Fewest entries read first from each of several listing zsets merged into
#: one page (``_read_merged``).
MERGE_FIRST = 4


def stamp(at: float) -> str:
    """``at`` (epoch seconds) as the listing score lua/lib/clock.lua
    ``micros`` writes: whole microseconds, the same double arithmetic."""
    return f"{math.floor(at * 1_000_000 + 0.5):0{STAMP_DIGITS}d}"


def entry_of(job_id: str, score: float) -> Entry:
    return int(score) / 1_000_000, job_id


def _after(entry: Entry, after: Entry | None, ascending: bool) -> bool:
    """Whether ``entry`` comes after the cursor ``after`` in the page order."""
    return after is None or (entry > after if ascending else entry < after)


def start_ranks(pipe: Pipe, indexes: list[str], after: Entry, ascending: bool) -> list[int]:
    """Rank (0-based, in the page order) of the first entry after ``after``
    in each of ``indexes`` (one round trip)."""
    at, after_id = int(stamp(after[0])), after[1]
    below, above = ("-inf", f"({at}") if ascending else (f"({at}", "+inf")
    replies = pipe(lambda p: [(p.zcount(i, below, above), p.zrangebyscore(i, at, at)) for i in indexes])
    ranks = []
    for n, ties in zip(replies[::2], replies[1::2], strict=True):
        ranks.append(n + sum(1 for m in ties if (m <= after_id if ascending else m >= after_id)))
    return ranks


def read_after_many(pipe: Pipe, reads: list[tuple[str, Entry, int]]) -> list[list[Entry]]:
    """For each ``(index, after, count)``: up to ``count`` entries of
    ``index`` after ``after``, newest first (those tied at ``after``'s score
    with a smaller id, then those scored below it); one round trip for all."""

    def queue(p: Any) -> list[object]:
        for index, (at, _), count in reads:
            score = int(stamp(at))
            p.zrevrangebyscore(index, score, score, withscores=True)
            p.zrevrangebyscore(index, f"({score}", "-inf", start=0, num=count, withscores=True)
        return []

    replies = pipe(queue)
    out = []
    for k, (_, (_, after_id), count) in enumerate(reads):
        ties, below = replies[2 * k], replies[2 * k + 1]
        got = [entry_of(job_id, score) for job_id, score in ties if job_id < after_id]
        got += [entry_of(job_id, score) for job_id, score in below]
        out.append(got[:count])
    return out


def start_rank(pipe: Pipe, index: str, after: Entry, ascending: bool) -> int:
    """Rank (0-based, in the page order) of the first entry after ``after``."""
    return start_ranks(pipe, [index], after, ascending)[0]


def merged_entries(runs: list[list[Entry]], count: int, ascending: bool) -> list[Entry]:
    """The first ``count`` entries of ``runs`` (each in the page order), merged."""
    if len(runs) == 1:
        return runs[0]
    merged = heapq.merge(*runs, reverse=not ascending)
    seen: set[str] = set()  # a job moved between two reads shows once
    return list(islice((e for e in merged if not (e[1] in seen or seen.add(e[1]))), count))


class RedisListingPart(Part):
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
        pipe = self._pipe
        if status is JobStatus.InProgress:
            return self._leased(queue, name, after, ascending)[:count]
        statuses = [status] if status else [s for s in JobStatus if s is not JobStatus.InProgress]
        if queue is not None and name is not None:
            runs = [self._both(s, queue, name, count, after, ascending) for s in statuses]
        else:
            indexes = self._indexes(statuses, queue, name)
            ranks = start_ranks(pipe, indexes, after, ascending) if after else [0] * len(indexes)
            runs = [self._read_merged(indexes, ranks, count, ascending)]
        if status is None:
            runs.append(self._leased(queue, name, after, ascending)[:count])
        return merged_entries(runs, count, ascending)

    def _read_merged(self, indexes: list[str], ranks: list[int], count: int, ascending: bool) -> list[Entry]:
        """The first ``count`` entries, in the page order, of ``indexes``
        read from ``ranks`` (each index's first rank past the cursor). One
        index: one read of ``count``. Several (a status's zsets of every
        queue): a share of each first (MERGE_FIRST, or twice ``count`` over
        the indexes), then, round by round (one pipelined read each), twice
        as many more only from the indexes whose last entry read comes before
        the ``count``-th entry merged so far: an index whose last entry is
        that entry or past it holds nothing the page needs. Exact; about ``count``
        entries a page are read whatever the number of queues, not ``count``
        of each."""
        if not indexes:
            return []
        step = count if len(indexes) == 1 else max(MERGE_FIRST, -(-2 * count // len(indexes)))
        runs: list[list[Entry]] = [[] for _ in indexes]
        want = dict.fromkeys(range(len(indexes)), step)
        while want:
            reads = [(i, ranks[i] + len(runs[i]), want[i]) for i in want]
            got = self._pipe(
                lambda p, todo=reads: [
                    p.zrange(indexes[i], start, start + n - 1, desc=not ascending, withscores=True)
                    for i, start, n in todo
                ]
            )
            more = []
            for (i, _, n), read in zip(reads, got, strict=True):
                runs[i].extend(entry_of(job_id, score) for job_id, score in read)
                if len(read) == n:
                    more.append(i)  # it may hold more
            merged = merged_entries(runs, count, ascending)
            cut = merged[count - 1] if len(merged) >= count else None
            # an index whose last entry is the cut or past it holds nothing the page needs
            want = {i: want[i] * 2 for i in more if cut is None or _after(cut, runs[i][-1], ascending)}
        return merged_entries(runs, count, ascending)[:count]

    def _indexes(self, statuses: list[JobStatus], queue: str | None, name: str | None) -> list[str]:
        """The listing zsets of ``statuses``: that of ``queue`` or of ``name``
        (at most one given), or with neither those of every queue (one read
        of the queue names)."""
        if queue is not None:
            return [self.keys.by_queue(s, queue) for s in statuses]
        if name is not None:
            return [self.keys.by_name(s, name) for s in statuses]
        names = self._queue_names()
        return [self.keys.by_queue(s, q) for s in statuses for q in names]

    def _queue_names(self) -> list[str]:
        """Every queue ever indexed (``{P}:queue_names``), sorted."""
        [names] = self._pipe(lambda p: p.smembers(self.keys.queue_names))
        return sorted(names)

    def _both(
        self, status: JobStatus, queue: str, name: str, count: int, after: Entry | None, ascending: bool
    ) -> list[Entry]:
        """The next ``count`` entries of ``status`` in ``queue`` named ``name``
        after ``after``: the smaller of the two zsets walked, each chunk's
        members looked up in the other (module docstring)."""
        pipe, pair = self._pipe, [self.keys.by_queue(status, queue), self.keys.by_name(status, name)]
        sizes = pipe(lambda p: [p.zcard(k) for k in pair])
        if not min(sizes):
            return []
        walk, other = pair if sizes[0] <= sizes[1] else pair[::-1]
        start = start_rank(pipe, walk, after, ascending) if after else 0
        out: list[Entry] = []
        chunk = max(count, 64)
        while len(out) < count:
            [got] = pipe(
                lambda p, r=start, n=chunk: p.zrange(walk, r, r + n - 1, desc=not ascending, withscores=True)
            )
            if not got:
                break
            [found] = pipe(lambda p, g=got: p.zmscore(other, [job_id for job_id, _ in g]))
            out.extend(
                entry_of(job_id, score)
                for (job_id, score), hit in zip(got, found, strict=True)
                if hit is not None
            )
            if len(got) < chunk:
                break
            start, chunk = start + chunk, min(chunk * 2, CHUNK_MOST)
        return out[:count]

    def _leased(
        self, queue: str | None, name: str | None, after: Entry | None, ascending: bool
    ) -> list[Entry]:
        """Every InProgress job of ``queue`` and/or named ``name`` (None: any)
        after ``after``, in the page order: the leases zset's members, each
        one's queue, name and last_updated_at read (two round trips; jobs
        that left InProgress between the reads are dropped). ``at`` is
        rounded to the microsecond, as the listing scores hold it."""
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
        """See OperatingContract.count_jobs: index reads, not counts() of
        every queue and status: ZCARD of the listing zset of ``status`` in
        ``queue`` (without one, of every queue, summed; the leases zset for
        InProgress), ``_count_named`` with a name."""
        status = JobStatus(status)
        if name:
            return self._count_named(status, queue or None, name)
        if status is JobStatus.InProgress:
            if queue:
                return len(self._leased(queue, None, None, True))
            [n] = self._pipe(lambda p: p.zcount(self.keys.leases, "-inf", "(+inf"))  # not LEASES_PAD
        else:
            indexes = self._indexes([status], queue or None, None)
            n = sum(self._pipe(lambda p: [p.zcard(i) for i in indexes]))
        return int(n)

    def _count_named(self, status: JobStatus, queue: str | None, name: str) -> int:
        """ZCARD of the name's listing zset of ``status``, ZINTERCARD of it and
        the queue's with a queue; for InProgress, the count of ``_leased``."""
        if status is JobStatus.InProgress:
            return len(self._leased(queue, name, None, True))
        if queue is None:
            [n] = self._pipe(lambda p: p.zcard(self.keys.by_name(status, name)))
        else:
            pair = [self.keys.by_queue(status, queue), self.keys.by_name(status, name)]
            [n] = self._pipe(lambda p: p.zintercard(2, pair))
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
        return listed_page(entries, hashes, status, queue, name, limit, bool(cursor))


def listed_page(
    entries: list[Entry],
    hashes: list[dict[str, str]],
    status: JobStatus | None,
    queue: str | None,
    name: str | None,
    limit: int,
    after_cursor: bool,
) -> Page:
    """A listing's page from its next ``limit`` + 1 index ``entries`` and the
    hashes of the first ``limit`` (empty: deleted since the index was read):
    the jobs that still match, ``next_cursor`` when an entry is left over,
    ``prev_cursor`` the first entry's key when the page was read
    ``after_cursor``."""
    items: list[Job] = []
    for (_, job_id), fields in zip(entries, hashes, strict=False):
        if not fields:
            continue  # deleted since the index was read
        job = job_from_hash(job_id, fields)
        if (
            (status is None or job.status is status)
            and (queue is None or job.queue == queue)
            and (name is None or job.name == name)
        ):
            items.append(job)  # else: changed since the index was read
    more = len(entries) > limit
    first = encode_cursor(*entries[0]) if after_cursor and entries else None
    return Page(items, encode_cursor(*entries[limit - 1]) if more else None, first)
