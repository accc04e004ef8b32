"""``list_jobs`` of the Redis store (a mixin of RedisStore; SharedStore checks
the limit and order): keyset pages over the ``updated`` zsets.

The index is ``{P}:updated:<status>`` when a status is given, else
``{P}:updated`` (score last_updated_at, member id). Redis orders equal scores
by member, so ``ZRANGE … REV`` yields ``(last_updated_at, id)`` descending,
the order of the SQL store. A cursor ``(at, id)`` is turned into a start rank
with ``ZCOUNT (at +inf`` plus the members tied at ``at`` that sort at or after
``id`` (O(log N) plus the tie group), so a page costs the same at any depth.

Cost: without queue/name filters a page reads ``limit + 1`` entries and job
hashes (three round trips with a cursor). With a queue or name filter the
index is scanned in chunks and the non-matching jobs are read and skipped; one
call reads at most SCAN_BUDGET entries. When the budget runs out first, the
page holds the matches found so far (possibly fewer than ``limit``, even none)
and ``next_cursor`` resumes after the last entry scanned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from store.cursor import decode_cursor, encode_cursor
from store.lifecycle import JobStatus
from store.models import Job, Page
from store.redis.codec import job_from_hash
from store.redis.keys import Keys
from store.redis.plumbing import RedisPlumbing

#: Most index entries (and job hashes) one filtered ``list_jobs`` call reads.
SCAN_BUDGET = 5000
#: Entries read per round trip when filtering by queue or name.
SCAN_CHUNK = 200

#: Runs commands queued on a pipeline by the callable; returns their replies.
Pipe = Callable[[Callable[[Any], object]], list[Any]]


def _start_rank(pipe: Pipe, index: str, cursor: str, ascending: bool) -> int:
    """Rank (0-based, in the page order) of the first entry after the cursor."""
    at, after_id = decode_cursor(cursor)
    if ascending:
        older, ties = pipe(lambda p: (p.zcount(index, "-inf", f"({at!r}"), p.zrangebyscore(index, at, at)))
        return older + sum(1 for member in ties if member <= after_id)
    newer, ties = pipe(lambda p: (p.zcount(index, f"({at!r}", "+inf"), p.zrangebyscore(index, at, at)))
    return newer + sum(1 for member in ties if member >= after_id)


def _read_chunk(
    pipe: Pipe, keys: Keys, index: str, rank: int, count: int, ascending: bool
) -> list[tuple[str, float, dict]]:
    """``count`` index entries from ``rank`` on (in the page order), each with
    its job hash (empty when the job was deleted meanwhile): two round trips."""
    [entries] = pipe(lambda p: p.zrange(index, rank, rank + count - 1, desc=not ascending, withscores=True))
    hashes = pipe(lambda p: [p.hgetall(keys.job(job_id)) for job_id, _ in entries])
    return [(job_id, score, h) for (job_id, score), h in zip(entries, hashes, strict=True)]


class ListingMixin(RedisPlumbing):
    """The engine half of ``list_jobs``."""

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
        first when ``ascending`` (see the module docstring). Raises
        ValidationError for a bad cursor."""
        pipe, keys = self._pipe, self.keys
        index = keys.updated(status)
        rank = _start_rank(pipe, index, cursor, ascending) if cursor else 0
        filtered = queue is not None or name is not None
        chunk = max(limit + 1, SCAN_CHUNK) if filtered else limit + 1
        found: list[tuple[Job, float]] = []
        last: tuple[float, str] | None = None
        scanned, exhausted = 0, False
        while len(found) <= limit and scanned < SCAN_BUDGET:
            entries = _read_chunk(pipe, keys, index, rank, chunk, ascending)
            for job_id, score, fields in entries:
                scanned, rank, last = scanned + 1, rank + 1, (score, job_id)
                if not fields:
                    continue  # deleted since the index was read
                job = job_from_hash(fields)
                if (
                    (status is None or job.status is status)
                    and (queue is None or job.queue == queue)
                    and (name is None or job.name == name)
                ):
                    found.append((job, score))
                    if len(found) > limit:
                        break
            if len(found) <= limit and len(entries) < chunk:
                exhausted = True
                break
        items = [job for job, _ in found[:limit]]
        if len(found) > limit:
            job, score = found[limit - 1]
            return Page(items, encode_cursor(score, job.id))
        if not exhausted and last is not None:
            return Page(items, encode_cursor(*last))  # budget spent: resume after the last entry read
        return Page(items, None)
