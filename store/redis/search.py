"""``search_jobs`` of the Redis store (a mixin of RedisStore): an honest,
bounded scan. Redis has no index on part of an id, on error text or on
payload fields, so the search reads the filtered listing indexes (status,
queue and name narrow them exactly, store/redis/listing.py; without a queue
or a name, a status's zsets of every queue) merged newest first, at most
``scan_limit`` entries, and tests each job with store/search.py
``matches``. Part of an id is tested on the index entry itself, so only
jobs whose id matches are read; error text and payload on PROBE_FIELDS of
each job (one HMGET), so only jobs that pass are read whole.

Cost: one round trip for the first FIRST_READ entries of every index, one
more each time an index's CHUNK more are read, one pipelined read of the
candidates' PROBE_FIELDS (error or payload searched) and one of the
matching hashes per chunk scanned that holds any. ``complete`` is False when the scan limit is
reached before the page fills.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

import orjson

from store.lifecycle import JobStatus
from store.redis.codec import job_from_hash
from store.redis.listing import Entry, ListingMixin, entry_of, read_after
from store.search import SearchPage, SearchQuery, matches

#: Index entries (and at most as many job hashes) read per round trip.
CHUNK = 500
#: Entries of the first read of one listing zset in a scan (``_streams``;
#: later reads take CHUNK).
FIRST_READ = 64
#: The job-hash fields ``matches`` reads (with the id): a search by error
#: text or payload reads these first and whole hashes only for the jobs that
#: pass, a fifth of the bytes and no Job built per job scanned.
PROBE_FIELDS = ("status", "queue", "name", "error", "payload")


@dataclass(frozen=True, slots=True)
class Probe:
    """PROBE_FIELDS of one job, decoded (store/search.py ``Searchable``)."""

    id: str
    status: JobStatus
    queue: str
    name: str
    error: Any
    payload: Any


def _loads(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


class SearchMixin(ListingMixin):
    """The engine half of ``search_jobs``."""

    def _streams(self, query: SearchQuery) -> list[Iterator[Entry]]:
        """One stream of entries, newest first, per listing index the query
        reads: the leases zset's for InProgress (one read: it holds only the
        jobs in flight), the intersection walk's for a queue and a name
        (``_entries``, CHUNK at a time), else each of the statuses' zsets
        (of the queue, of the name, or of every queue), whose first reads
        (FIRST_READ each: a search that fills its page early reads little
        of each) are one round trip for them all (``_index_stream``)."""
        streams, indexed = [], []
        for status in query.statuses():
            if status is JobStatus.InProgress:
                streams.append(iter(self._leased(query.queue, query.name, None, False)))
            elif query.queue is not None and query.name is not None:
                streams.append(self._walk(status, query))
            else:
                indexed.append(status)
        indexes = self._indexes(indexed, query.queue, query.name) if indexed else []
        got = self._pipe(
            lambda p: [p.zrange(i, 0, FIRST_READ - 1, desc=True, withscores=True) for i in indexes]
        )
        return streams + [self._index_stream(i, g, FIRST_READ) for i, g in zip(indexes, got, strict=True)]

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

    def _index_stream(self, index: str, got: list[tuple[str, float]], count: int) -> Iterator[Entry]:
        """The entries of one listing zset, newest first, from ``got``, its
        first ``count`` (read beside the other indexes' in one round trip),
        then keyset reads of CHUNK (each after the last entry read, one round
        trip: ``read_after``)."""
        entries = [entry_of(job_id, score) for job_id, score in got]
        while True:
            yield from entries
            if len(entries) < count:
                return
            entries, count = read_after(self._pipe, index, entries[-1], CHUNK), CHUNK

    def _probe(self, ids: list[str], query: SearchQuery) -> list[str]:
        """The ids of ``ids`` whose PROBE_FIELDS pass ``query`` (one
        pipelined HMGET; jobs deleted meanwhile dropped)."""
        rows = self._pipe(lambda p: [p.hmget(self.keys.job(job_id), PROBE_FIELDS) for job_id in ids])
        passed = []
        for job_id, (status, queue, name, error, payload) in zip(ids, rows, strict=True):
            if status is None:
                continue
            probe = Probe(job_id, JobStatus(int(status)), queue, name, _loads(error), _loads(payload))
            if matches(probe, query):
                passed.append(job_id)
        return passed

    def _search(self, query: SearchQuery, limit: int, scan_limit: int) -> SearchPage:
        stream = heapq.merge(*self._streams(query), reverse=True)
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
                ids = self._probe(ids, query)
            if not ids:
                continue
            hashes = self._pipe(lambda p, c=ids: [p.hgetall(self.keys.job(job_id)) for job_id in c])
            found += [job for job in (job_from_hash(h) for h in hashes if h) if matches(job, query)]
        complete = len(found) >= limit or scanned < scan_limit or next(stream, None) is None
        return SearchPage(found[:limit], complete, scanned)
