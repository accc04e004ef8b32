"""Listing batches, newest first, a keyset page at a time (the shared part of
``store/sql/batch_list.py`` and ``store/redis/batch_list.py``).

Batch ids are UUIDv7 (``store.ids.new_id``): their text sorts by creation
time, so a page is "the ``limit`` greatest ids below the cursor" and the
cursor is the last id of the previous page.
"""

from __future__ import annotations

import uuid

from store.errors import ValidationError

#: Most batches one page lists.
MAX_BATCH_PAGE = 200


def check_page(limit: int, cursor: str | None) -> str | None:
    """The cursor as a canonical id (None: the first page). Raises
    ValidationError naming ``limit`` (1..MAX_BATCH_PAGE) or ``cursor`` (not an id)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_BATCH_PAGE:
        raise ValidationError("limit", f"must be an integer from 1 to {MAX_BATCH_PAGE}")
    if cursor is None:
        return None
    try:
        return str(uuid.UUID(cursor))
    except ValueError:
        raise ValidationError("cursor", "must be the next_cursor of a previous page") from None
