"""Bulk operations seen from the web: how many jobs an action on a filter
would change (the count at preview), shared by the API (``POST
/api/operations`` without ``expected``) and the console's bulk panel.

The work itself is ``store.bulk``'s: ``bulk.start`` records the operation and
a worker's maintenance thread runs it in batches (or, with no worker, the
web app on each read of it: ``bulk.advance_unattended``). The preview is
``store.bulk``'s too (the ``leasehold job`` command counts the same way).
"""

from __future__ import annotations

import re

from store.bulk import Preview, preview, statuses_of

#: Destructive actions over this many jobs ask the operator to type the count.
CONFIRM_ABOVE = 1_000
#: Actions that cannot be undone by another bulk action.
DESTRUCTIVE = frozenset({"cancel", "delete"})
#: Operation ids: a UUID, or an Idempotency-Key of these characters (they
#: appear in URLs and in the audit log's text, see ``OPERATION_IN_TEXT``).
OPERATION_ID = re.compile(r"^[A-Za-z0-9._~-]{1,100}$")
#: Finds the operation id in an audit entry's message (``store.bulk.describe``).
OPERATION_IN_TEXT = re.compile(r"\boperation ([A-Za-z0-9._~-]{1,100})")


def needs_typed_count(action: str, count: int) -> bool:
    """True when the operator must type the count to confirm."""
    return action in DESTRUCTIVE and count > CONFIRM_ABOVE


__all__ = ["CONFIRM_ABOVE", "DESTRUCTIVE", "Preview", "needs_typed_count", "preview", "statuses_of"]
