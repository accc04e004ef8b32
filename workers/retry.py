"""Retrying a store write through an outage: one helper for every writer.

Every worker write (an ack, a nack, a timeout) is guarded by its lease token,
so sending it again after ``StoreUnavailable`` is safe: if the first try did
land, the retry is refused by fencing and changes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from store.errors import StoreUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds between attempts while the store is unavailable (the default schedule).
OUTAGE_RETRY_DELAYS_S = (0.1, 0.5, 2.0)


def retry_unavailable(
    call: Callable[[], T],
    delays_s: Sequence[float],
    what: str,
    *,
    sleep: Callable[[float], object] = time.sleep,
) -> T:
    """Return ``call()``, tried once and then again after each of ``delays_s``
    (seconds) while it raises ``StoreUnavailable``: ``len(delays_s) + 1`` tries
    at most. ``what`` names the write in the log.

    Raises the last ``StoreUnavailable`` when every try failed; any other
    exception (``LeaseLost``, ``JobNotFound``, ...) at once, untried again.
    ``sleep`` is the wait between tries (tests pass their own)."""
    for delay in delays_s:
        try:
            return call()
        except StoreUnavailable as exc:
            log.warning("%s: store unavailable (%s); trying again in %gs", what, exc, delay)
            sleep(delay)
    return call()
