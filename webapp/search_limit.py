"""How often one caller may search jobs (by part of an id, error text or
payload): SEARCH_LIMIT searches per window of SEARCH_WINDOW_S seconds, per
API token or per console user.

A search reads up to the store's scan window of jobs, far more than a page
of a listing, so a caller repeating them could keep the store busy for
everyone. The count lives in the store (``JobStore.record_failure``, the
fixed-window counter login throttling uses), so every gunicorn worker and
every process on the store shares one allowance per caller.
"""

from __future__ import annotations

import math

from store.base import JobStore

#: Searches one caller may run per window.
SEARCH_LIMIT = 10
#: The window, seconds, opened by the caller's first search.
SEARCH_WINDOW_S = 10.0


def search_key(caller: str) -> str:
    """The failure-window key (``JobStore.record_failure``) of ``caller``'s searches."""
    return "search:" + caller


def search_wait(store: JobStore, caller: str) -> int:
    """Count one search by ``caller`` (``api:<token digest>``, ``console:<user>``);
    0 when it may run, else the whole seconds to wait (a ``Retry-After``)."""
    key = search_key(caller)
    if store.record_failure(key, SEARCH_WINDOW_S) <= SEARCH_LIMIT:
        return 0
    _, left = store.failure_count(key)
    return max(1, math.ceil(left))
