"""Bulk operations seen from the web: how many jobs an action on a filter
would change (the count at preview), shared by the API (``POST
/api/operations`` without ``expected``) and the console's bulk panel.

The work itself is ``store.bulk``'s: ``bulk.start`` records the operation and
a worker's maintenance thread runs it in batches.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from store.base import MAX_PAGE_SIZE, JobStore
from store.bulk import ACTIONS
from store.lifecycle import OPERATIONS, JobStatus
from store.models import Counts, Job

#: Jobs a preview reads at most when the counters cannot answer (a name
#: filter): past it the count is a lower bound ("more than N").
COUNT_SCAN = 10_000
#: Destructive actions over this many jobs ask the operator to type the count.
CONFIRM_ABOVE = 1_000
#: Actions that cannot be undone by another bulk action.
DESTRUCTIVE = frozenset({"cancel", "delete"})
#: Operation ids: a UUID, or an Idempotency-Key of these characters (they
#: appear in URLs and in the audit log's text, see ``OPERATION_IN_TEXT``).
OPERATION_ID = re.compile(r"^[A-Za-z0-9._~-]{1,100}$")
#: Finds the operation id in an audit entry's message (``store.bulk.describe``).
OPERATION_IN_TEXT = re.compile(r"\boperation ([A-Za-z0-9._~-]{1,100})")


@dataclass(frozen=True, slots=True)
class Preview:
    """What an action on a filter would touch: ``eligible`` jobs whose status
    allows it (exact unless ``at_least``), ``matching`` every job passing the
    filter where the counters know it."""

    eligible: int
    at_least: bool
    matching: int | None


def statuses_of(action: str) -> frozenset[JobStatus]:
    """The statuses ``action`` (a key of ``store.bulk.ACTIONS``) applies to."""
    return OPERATIONS[ACTIONS[action]].sources


def needs_typed_count(action: str, count: int) -> bool:
    """True when the operator must type the count to confirm."""
    return action in DESTRUCTIVE and count > CONFIRM_ABOVE


def _counted(
    counts: Counts, status: JobStatus | None, queue: str | None, allowed: frozenset[JobStatus]
) -> Preview:
    source = counts.by_queue.get(queue, {}) if queue else counts.by_status
    chosen = {status} if status else set(JobStatus)
    matching = sum(source.get(s.name, 0) for s in chosen)
    eligible = sum(source.get(s.name, 0) for s in chosen & allowed)
    return Preview(eligible, False, matching)


def _listed(
    store: JobStore, status: JobStatus, queue: str | None, name: str | None, budget: int
) -> Iterator[Job]:
    cursor, read = None, 0
    while read < budget:
        page = store.list_jobs(
            status=status, queue=queue, name=name, limit=min(MAX_PAGE_SIZE, budget - read), cursor=cursor
        )
        read += len(page.items)
        yield from page.items
        if page.next_cursor is None or not page.items:
            return
        cursor = page.next_cursor


def preview(
    store: JobStore,
    action: str,
    status: JobStatus | None = None,
    queue: str | None = None,
    name: str | None = None,
    scan: int | None = None,
) -> Preview:
    """Count the jobs ``action`` would change on the filter: exact from the
    counters without a name; with one, by listing each eligible status, at
    most ``scan`` (default COUNT_SCAN) jobs in all (``at_least`` past it)."""
    scan = COUNT_SCAN if scan is None else scan
    allowed = statuses_of(action)
    if not name:
        return _counted(store.counts(), status, queue, allowed)
    found = 0
    for s in sorted(allowed & ({status} if status else set(JobStatus))):
        found += sum(1 for _ in _listed(store, s, queue, name, scan + 1 - found))
        if found > scan:
            return Preview(scan, True, None)
    return Preview(found, False, None)
