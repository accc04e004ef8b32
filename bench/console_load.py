"""Fill a store with jobs of mixed statuses fast, for the console bench
(bench/console_pages.py).

Job ``i`` of ``n`` (0 the oldest) has queue ``q{i % QUEUES:02d}``, name
``job-{(i // QUEUES) % NAMES:02d}`` (so every queue/name pair occurs), a
status picked by ``(i * 7919) % 10,000`` against MIX (a permutation of the
residues: the statuses interleave in time), a payload ``{"i", "path",
"user": "user-<i % 1000>"}`` and, when Failed or Scheduled, one of ERRORS.
Times are spread evenly over the SPAN_S before the load; a Scheduled job is
due 1 min to 1 day after it.

As in bench/scale.py the jobs are copies written by the store's fixture
loader (bench/fixtures/): one template job per status is run through the
store itself (enqueue; claim and complete / fail for good / fail with a retry
pending; cancel), then the engine writes each copy with its own id, queue,
name, payload, error message and times, with the events, indexes, counters
and history buckets its own paths would have written (SQL: INSERT … SELECT
from JSON arrays, then ANALYZE; Redis: bench/fixtures/fixtures.lua, 1,000 copies a
call). After the copy, IN_PROGRESS Queued jobs are claimed by the store
with a lease of a day.

Failed attempts (``store.attempts``) are not copied: only the templates have them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from bench.fixtures import Copy, load_copies, make_templates
from store import JobStore
from store.lifecycle import JobStatus
from store.models import Job

QUEUES = 20
NAMES = 50
#: Statuses of the copies, per 10,000 jobs (Queued jobs then become InProgress, see IN_PROGRESS).
MIX: tuple[tuple[JobStatus, int], ...] = (
    (JobStatus.Completed, 7_200),
    (JobStatus.Queued, 1_500),
    (JobStatus.Scheduled, 500),
    (JobStatus.Failed, 500),
    (JobStatus.Canceled, 300),
)
#: Queued jobs claimed by the store after the copy (a lease of LEASE_S).
IN_PROGRESS = 300
LEASE_S = 86_400.0
#: The copies' times are spread over this many seconds before the load.
SPAN_S = 6 * 86_400.0
#: Error messages of Failed and Scheduled jobs: ERRORS[i % 5] with k = i % 40.
ERRORS = (
    "connection refused by db-{k}",
    "timeout after 30 s",
    "KeyError: 'path'",
    "disk full on /var/spool/{k}",
    "HTTP 503 from api-{k}",
)
WORKER = "bench-loader"
assert sum(share for _, share in MIX) == 10_000


def queue_of(i: int) -> str:
    return f"q{i % QUEUES:02d}"


def name_of(i: int) -> str:
    return f"job-{(i // QUEUES) % NAMES:02d}"


def status_of(i: int) -> JobStatus:
    r = (i * 7919) % 10_000
    for status, share in MIX:
        if r < share:
            return status
        r -= share
    raise AssertionError("MIX does not add up to 10,000")


def payload_of(i: int) -> dict[str, Any]:
    return {"i": i, "path": f"/src/module_{i}.py", "user": f"user-{i % 1000:03d}"}


def message_of(i: int) -> str:
    return ERRORS[i % len(ERRORS)].format(k=i % 40)


@dataclass
class Loaded:
    """What a load made: seconds, jobs by status, the templates by status."""

    seconds: float
    by_status: dict[str, int]
    templates: dict[JobStatus, Job] = field(default_factory=dict)


def copies(n: int, now: float, progress: bool) -> Iterator[Copy]:
    """The ``n`` copies of the module docstring, oldest first."""
    t0 = time.perf_counter()
    end, step = now - 60.0, SPAN_S / n
    for i in range(n):
        status = status_of(i)
        due = now + 60 + i % 86_400 if status is JobStatus.Scheduled else None
        yield Copy(status, queue_of(i), name_of(i), end - (n - i) * step, payload_of(i), message_of(i), due)
        if progress and ((i + 1) % 100_000 == 0 or i + 1 == n):
            rate = (i + 1) / max(time.perf_counter() - t0, 1e-9)
            print(f"#   copied {i + 1:,} of {n:,} ({rate:,.0f}/s)", file=sys.stderr, flush=True)


def load(store: JobStore, n: int, progress: bool = True) -> Loaded:
    """Add ``n`` jobs (see the module docstring) to an empty store."""
    t0 = time.perf_counter()
    statuses = [s for s, _ in MIX]
    templates = make_templates(store, statuses, queue=queue_of(0), name=name_of(0), payload=payload_of(0))
    load_copies(store, templates, copies(n, store.now(), progress))
    queues = [queue_of(q) for q in range(QUEUES)]
    claimed = store.claim(WORKER, queues, IN_PROGRESS, lease_ttl_s=LEASE_S)
    assert len(claimed) == IN_PROGRESS, len(claimed)
    return Loaded(time.perf_counter() - t0, store.counts().by_status, templates)
