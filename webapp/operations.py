"""Bulk operations seen from the web: how many jobs an action on a filter
would change (the count at preview), shared by the API (``POST
/api/operations`` without ``expected``) and the console's bulk panel.

The work itself is ``store.bulk``'s: ``bulk.start`` records the operation and
a worker's maintenance thread runs it in batches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from store.base import JobStore
from store.bulk import ACTIONS
from store.lifecycle import OPERATIONS, JobStatus

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
    allows it, ``matching`` every job passing the filter (both exact)."""

    eligible: int
    matching: int


def statuses_of(action: str) -> frozenset[JobStatus]:
    """The statuses ``action`` (a key of ``store.bulk.ACTIONS``) applies to."""
    return OPERATIONS[ACTIONS[action]].sources


def needs_typed_count(action: str, count: int) -> bool:
    """True when the operator must type the count to confirm."""
    return action in DESTRUCTIVE and count > CONFIRM_ABOVE


def preview(
    store: JobStore,
    action: str,
    status: JobStatus | None = None,
    queue: str | None = None,
    name: str | None = None,
) -> Preview:
    """Count the jobs ``action`` would change on the filter, and every job
    passing it: exact, from the store's counters and indexes
    (``store.count_jobs``), whatever the filter and the store's size."""
    chosen = {status} if status else set(JobStatus)
    if name:
        counted = {s: store.count_jobs(s, queue=queue, name=name) for s in chosen}
    else:  # one read of the counters for every status
        source = store.counts().of(queue)
        counted = {s: int(source.get(s.name, 0)) for s in chosen}
    allowed = statuses_of(action)
    return Preview(sum(n for s, n in counted.items() if s in allowed), sum(counted.values()))
