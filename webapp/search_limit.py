"""How often one caller may search jobs (by part of an id, error text or
payload): ``LEASEHOLD_SEARCH_LIMIT`` searches (default 10) per window of
SEARCH_WINDOW_S seconds, per API token or per console user.

A search reads up to the store's scan window of jobs, far more than a page
of a listing, so a caller repeating them could keep the store busy for
everyone. The count lives in the store (``JobStore.record_failure``, the
fixed-window counter login throttling uses), so every gunicorn worker and
every process on the store shares one allowance per caller.
"""

from __future__ import annotations

import math

from store.base import JobStore

#: The window, seconds, opened by the caller's first search.
SEARCH_WINDOW_S = 10.0


def search_wait(store: JobStore, caller: str, limit: int) -> int:
    """Count one search by ``caller`` (``api:<token digest>``, ``console:<user>``)
    allowed ``limit`` searches a window; 0 when it may run, else the whole
    seconds to wait (a ``Retry-After``)."""
    key = "search:" + caller
    if store.record_failure(key, SEARCH_WINDOW_S) <= limit:
        return 0
    _, left = store.failure_count(key)
    return max(1, math.ceil(left))
