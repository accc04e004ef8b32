"""Which shards of a sharded Redis store answer (docs/architecture.md,
Shards): a shard down is a shard down, not an outage. A call to a shard
that raises StoreUnavailable marks it down; claims and the reads that merge
the shards leave it out for RETRY_S before asking it again and say so
(``unavailable``: the console names it), and its first answer marks it up.
When no shard answers, the call raises as an unsharded store does."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from store.errors import StoreUnavailable

T = TypeVar("T")

#: Seconds a claim leaves a shard alone after it did not answer.
RETRY_S = 5.0


class ShardHealth:
    """Down shards by index, with the error each last gave; thread-safe."""

    def __init__(self) -> None:
        self._down: dict[int, tuple[float, str]] = {}
        self._lock = threading.Lock()

    def failed(self, index: int, exc: Exception) -> None:
        with self._lock:
            self._down[index] = (time.monotonic(), str(exc))

    def answered(self, index: int) -> None:
        if index in self._down:
            with self._lock:
                self._down.pop(index, None)

    def resting(self, index: int) -> bool:
        """Whether a claim should leave shard ``index`` alone for now."""
        found = self._down.get(index)
        return found is not None and time.monotonic() - found[0] < RETRY_S

    def unavailable(self) -> dict[int, str]:
        """The shards that did not answer their last call: index -> error."""
        with self._lock:
            return {k: error for k, (_, error) in sorted(self._down.items())}

    def each(self, shards: Sequence[Any], call: Callable[[Any], T]) -> list[T]:
        """``call(shard)`` for every shard that answers (the others marked
        down; one marked down less than RETRY_S ago is not asked); raises
        StoreUnavailable when none does."""
        out: list[T] = []
        last: StoreUnavailable | None = None
        for index, shard in enumerate(shards):
            if self.resting(index):
                continue  # still marked down: left out without waiting for its timeout again
            try:
                out.append(call(shard))
            except StoreUnavailable as exc:
                self.failed(index, exc)
                last = exc
                continue
            self.answered(index)
        if not out:
            if last is None:  # every shard resting: ask them, the wait is the caller's
                return [call(shard) for shard in shards]
            raise last
        return out
