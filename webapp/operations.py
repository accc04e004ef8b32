"""Bulk operations seen from the web: how many jobs an action on a filter
would change (the count at preview), shared by the API (``POST
/api/operations`` without ``expected``) and the console's bulk panel.

The work itself is ``store.bulk``'s: ``bulk.start`` records the operation and
a worker's maintenance thread runs it in batches (or, with no worker, the
web app on each read of it: ``bulk.advance_unattended``). The preview is
``store.bulk``'s too (the ``leasehold job`` command counts the same way).
"""

from __future__ import annotations

import os
import re
import socket

from store import bulk
from store.base import JobStore
from store.bulk import Preview, preview, statuses_of
from store.models import BulkOperation

#: Destructive actions over this many jobs ask the operator to type the count.
CONFIRM_ABOVE = 1_000
#: Actions that cannot be undone by another bulk action.
DESTRUCTIVE = frozenset({"cancel", "delete"})
#: Operation ids: a UUID, or an Idempotency-Key of these characters (they
#: appear in URLs and in the audit log's text, see ``OPERATION_IN_TEXT``).
OPERATION_ID = re.compile(r"^[A-Za-z0-9._~-]{1,100}$")
#: Finds the operation id in an audit entry's message (``store.bulk.describe``).
OPERATION_IN_TEXT = re.compile(r"\boperation ([A-Za-z0-9._~-]{1,100})")


#: Seconds of batches one read of an unattended operation may run (well inside a request timeout).
READ_BUDGET_S = 2.0


def advance(store: JobStore, operation: BulkOperation) -> BulkOperation:
    """Run ``operation`` for up to READ_BUDGET_S seconds when no worker has
    advanced it for ``bulk.PICKUP_S`` seconds (``bulk.advance_unattended``:
    the same batches under the same lock, so with a worker each batch still
    runs once); the operation as it now stands.

    Called on each read of the operation (the API's GET, the console's page,
    which polls itself every second), so it finishes without a worker. Work
    done inside a request, not a background thread: any web process may
    serve the read (gunicorn runs several, and restarts them), the lock
    keeps the batches one at a time, and nothing is left running in a
    process that is being recycled."""
    return bulk.advance_unattended(
        store, operation, f"web:{socket.gethostname()}:{os.getpid()}", budget_s=READ_BUDGET_S
    )


def needs_typed_count(action: str, count: int) -> bool:
    """True when the operator must type the count to confirm."""
    return action in DESTRUCTIVE and count > CONFIRM_ABOVE


__all__ = [
    "CONFIRM_ABOVE",
    "DESTRUCTIVE",
    "READ_BUDGET_S",
    "Preview",
    "advance",
    "needs_typed_count",
    "preview",
    "statuses_of",
]
