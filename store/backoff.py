"""Backoff between retries (``RetryPolicy``): the delay the lifecycle's one
retry decision (store/lifecycle.py ``decide_failure``) gives a failed job,
the store's default or a handler's own.

Pure: no I/O, no store imports.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff for retries.

    ``delay = min(max_delay_s, base_s * 2**retry_count)``, with ``retry_count``
    the count after the failure (first retry waits ``2 * base_s``). With
    ``jitter`` = j in [0, 1] the delay is drawn
    uniformly from ``[delay * (1 - j), delay]`` ("equal/full jitter" of the AWS
    Architecture Blog, "Exponential Backoff and Jitter", 2015), so a burst of
    failures does not retry in lockstep.
    """

    base_s: float = 2.0
    max_delay_s: float = 3600.0
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if self.base_s < 0:
            raise ValueError("retry base must be >= 0 seconds")
        if self.max_delay_s < 0:
            raise ValueError("retry max delay must be >= 0 seconds")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("retry jitter must be within [0, 1]")

    def delay_s(self, retry_count: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``retry_count`` (>= 1)."""
        # Cap the exponent first: 2**retry_count overflows float beyond ~1024.
        exponent = min(retry_count, 64)
        delay = min(self.max_delay_s, self.base_s * float(2**exponent))
        if self.jitter and delay:
            low = delay * (1.0 - self.jitter)
            delay = (rng or random).uniform(low, delay)
        return delay

    def overridden(
        self, base_s: float | None = None, max_delay_s: float | None = None, jitter: float | None = None
    ) -> RetryPolicy:
        """This policy with the values given (None keeps this one's): a
        handler's own backoff over the store's default. Raises ValueError
        as the constructor does."""
        given = {"base_s": base_s, "max_delay_s": max_delay_s, "jitter": jitter}
        changes = {k: float(v) for k, v in given.items() if v is not None}
        return dataclasses.replace(self, **changes) if changes else self
