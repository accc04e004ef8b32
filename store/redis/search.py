"""``search_jobs`` of the Redis store (a mixin of RedisStore): an honest,
bounded scan. Redis has no index on part of an id, on error text or on
payload fields, so the search reads the filtered listing indexes (status,
queue and name narrow them exactly, store/redis/listing.py; without a queue
or a name, a status's zsets of every queue) merged newest first, at most
``scan_limit`` entries, and tests each job with store/search.py
``matches``. Part of an id is tested on the index entry itself, so only
jobs whose id matches are read; error text and payload on those fields of
each job alone (``_probe``), so only jobs that pass are read whole.

Cost: one round trip for the first FIRST_READ entries of every index, one
more each time the indexes about to run out are read further (``_merge``),
and per chunk of CHUNK entries scanned one call reading the searched fields
of its jobs (error or payload searched; lua/job_fields.lua) and one
pipelined read of the hashes that pass, if any. ``complete`` is False when
the scan limit is reached before the page fills.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any

import orjson

from store.lifecycle import JobStatus
from store.redis.codec import job_from_hash
from store.redis.listing import Entry, RedisListingPart, entry_of, read_after_many
from store.search import SearchPage, SearchQuery, error_matches, matches, payload_matches

#: Index entries (and at most as many job hashes) read per round trip.
CHUNK = 500
#: Entries of the first read of one listing zset in a scan (``_streams``;
#: each later read of it takes twice its last, at most CHUNK: ``_merge``).
FIRST_READ = 64


def _loads(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


class RedisSearchPart(RedisListingPart):
    """The engine half of ``search_jobs``."""

    def _streams(self, query: SearchQuery) -> list[Iterator[Entry]]:
        """One stream of entries, newest first, per listing index the query
        reads: the leases zset's for InProgress (one read: it holds only the
        jobs in flight), the intersection walk's for a queue and a name
        (``_entries``, CHUNK at a time), else each of the statuses' zsets
        (of the queue, of the name, or of every queue) merged into one
        stream, whose first reads (FIRST_READ each: a search that fills its
        page early reads little of each) are one round trip for them all
        and whose further reads are batched (``_merge``)."""
        streams: list[Iterator[Entry]] = []
        leased: list[list[Entry]] = []
        indexed = []
        for status in query.statuses():
            if status is JobStatus.InProgress:
                leased.append(self._leased(query.queue, query.name, None, False))
            elif query.queue is not None and query.name is not None:
                streams.append(self._walk(status, query))
            else:
                indexed.append(status)
        if not indexed:
            return streams + [iter(run) for run in leased]
        indexes = self._indexes(indexed, query.queue, query.name)
        got = self._pipe(
            lambda p: [p.zrange(i, 0, FIRST_READ - 1, desc=True, withscores=True) for i in indexes]
        )
        return [*streams, self._merge(indexes, got, leased)]

    def _walk(self, status: JobStatus, query: SearchQuery) -> Iterator[Entry]:
        """Entries of ``status`` in the query's queue with its name, newest
        first, CHUNK at a time (the intersection walk of ``_entries``)."""
        after: Entry | None = None
        while True:
            chunk = self._entries(status, query.queue, query.name, CHUNK, after, False)
            yield from chunk
            if len(chunk) < CHUNK:
                return
            after = chunk[-1]

    def _merge(
        self, indexes: list[str], got: list[list[tuple[str, float]]], whole: list[list[Entry]]
    ) -> Iterator[Entry]:
        """The entries of ``indexes`` merged, newest first, from ``got``
        (their first FIRST_READ each), read further in batches, and with
        them the runs of ``whole`` (entries newest first, read whole).

        In rounds: every entry at or above the cut (the newest last entry
        read of the indexes that may hold more) is final, as nothing unread
        of any index comes before it: those are yielded, merged. Then every
        index that may hold more and whose last entry read comes before the
        CHUNK-th newest entry left (so it would run out within the next
        CHUNK entries yielded) is read further, all in one round trip
        (``read_after_many``), twice what it read last time (at most
        CHUNK). A scan spread over many queues thus costs a round trip or
        two; one busy queue among idle ones, a round trip per read of it."""
        runs = [[entry_of(job_id, score) for job_id, score in g] for g in got] + whole
        more = [len(g) == FIRST_READ for g in got] + [False] * len(whole)
        size = [FIRST_READ] * len(runs)
        last: list[Entry | None] = [run[-1] if run else None for run in runs]
        while True:
            open_ = [i for i, m in enumerate(more) if m]
            if not open_:
                yield from heapq.merge(*runs, reverse=True)
                return
            cut = max(last[i] for i in open_)  # type: ignore[type-var]
            final, kept = [], []
            for run in runs:
                k = next((j for j, e in enumerate(run) if e < cut), len(run))
                final.append(run[:k])
                kept.append(run[k:])
            yield from heapq.merge(*final, reverse=True)
            runs = kept
            left = list(islice(heapq.merge(*runs, reverse=True), CHUNK))
            edge = left[-1] if len(left) == CHUNK else None
            chosen = [i for i in open_ if edge is None or last[i] >= edge]  # type: ignore[operator]
            for i in chosen:
                size[i] = min(CHUNK, 2 * size[i])
            reads = read_after_many(self._pipe, [(indexes[i], last[i], size[i]) for i in chosen])  # type: ignore[misc]
            for i, read in zip(chosen, reads, strict=True):
                runs[i] = runs[i] + read
                more[i] = len(read) == size[i]
                if read:
                    last[i] = read[-1]

    def _probe(self, ids: list[str], query: SearchQuery) -> list[str]:
        """The ids of ``ids`` whose error (``error_matches``) and payload
        (``payload_matches``) pass the query, when searched. Those fields
        alone are read, of every job in one call (lua/job_fields.lua): the
        index read gave the status, queue and name, and ``matches`` tests
        every criterion again on the jobs read whole. So a payload search
        reads no error text and one command a chunk, not one a job; jobs
        deleted meanwhile are dropped."""
        fields = [
            f for f, wanted in (("error", query.error), ("payload", query.payload)) if wanted is not None
        ]
        flat = self._eval(self._lua.job_fields, self._route, [len(fields), *fields, *ids])
        passed = []
        for i, job_id in enumerate(ids):
            got = dict(zip(fields, flat[i * len(fields) : (i + 1) * len(fields)], strict=True))
            if query.error is not None and not error_matches(_loads(got["error"]), query.error):
                continue
            if query.payload is not None and (
                got["payload"] is None or not payload_matches(orjson.loads(got["payload"]), query.payload)
            ):
                continue
            passed.append(job_id)
        return passed

    def _search(self, query: SearchQuery, limit: int, scan_limit: int) -> SearchPage:
        def read(ids: list[str]) -> list[dict[str, str]]:
            return self._pipe(lambda p: [p.hgetall(self.keys.job(job_id)) for job_id in ids])

        return searched(self._streams(query), query, limit, scan_limit, self._probe, read)


def searched(
    streams: list[Iterator[Entry]],
    query: SearchQuery,
    limit: int,
    scan_limit: int,
    probe: Callable[[list[str], SearchQuery], list[str]],
    read: Callable[[list[str]], list[dict[str, str]]],
) -> SearchPage:
    """A search page from ``streams`` (index entries, each newest first),
    merged and scanned CHUNK entries at a time, at most ``scan_limit``:
    ids filtered by ``query.id_part``, by ``probe`` (error and payload),
    then the jobs ``read`` whole and tested with ``matches``."""
    stream = streams[0] if len(streams) == 1 else heapq.merge(*streams, reverse=True)
    found, scanned = [], 0
    while len(found) < limit and scanned < scan_limit:
        chunk = list(islice(stream, min(CHUNK, scan_limit - scanned)))
        if not chunk:
            break
        scanned += len(chunk)
        ids = [job_id for _, job_id in chunk]
        if query.id_part is not None:
            ids = [job_id for job_id in ids if query.id_part in job_id.lower()]
        if ids and (query.error is not None or query.payload is not None):
            ids = probe(ids, query)
        if not ids:
            continue
        jobs = (job_from_hash(i, h) for i, h in zip(ids, read(ids), strict=True) if h)
        found += [job for job in jobs if matches(job, query)]
    complete = len(found) >= limit or scanned < scan_limit or next(stream, None) is None
    return SearchPage(found[:limit], complete, scanned)
