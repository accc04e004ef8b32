"""A steady load for the fault tests: a thread that keeps a queue topped up
with ledger jobs while a fault is injected, so the workers are busy whenever
it strikes, however fast this machine drains the queue."""

from __future__ import annotations

import threading
from collections.abc import Callable

from store.base import JobStore
from store.errors import StoreUnavailable
from store.models import JobSpec


class Feeder(threading.Thread):
    """Keeps at least ``depth`` jobs Queued (checking every ``every_s``) until
    stopped or ``limit`` jobs were enqueued, at most ``rate_per_s`` jobs a
    second when given. ``make(i)`` builds job ``i``. A store that does not
    answer is retried at the next check."""

    def __init__(
        self,
        store: JobStore,
        make: Callable[[int], JobSpec],
        *,
        depth: int = 200,
        limit: int = 100_000,
        every_s: float = 0.05,
        rate_per_s: float | None = None,
    ) -> None:
        super().__init__(name="fault-feeder", daemon=True)
        self.store = store
        self.make = make
        self.depth = depth
        self.limit = limit
        self.every_s = every_s
        self.per_tick = self.limit if rate_per_s is None else max(1, round(rate_per_s * every_s))
        self.enqueued = 0
        self.errors: list[BaseException] = []
        self._stop_event = threading.Event()

    def stop(self) -> int:
        """Stop feeding; how many jobs were enqueued."""
        self._stop_event.set()
        self.join(30)
        return self.enqueued

    def run(self) -> None:
        try:
            while not self._stop_event.is_set() and self.enqueued < self.limit:
                try:
                    queued = self.store.counts().by_status.get("Queued", 0)
                    if queued < self.depth:
                        n = min(self.depth - queued, self.per_tick, self.limit - self.enqueued)
                        self.store.enqueue_many([self.make(self.enqueued + i) for i in range(n)])
                        self.enqueued += n
                except StoreUnavailable:
                    pass
                self._stop_event.wait(self.every_s)
        except BaseException as exc:  # reported by the test
            self.errors.append(exc)
