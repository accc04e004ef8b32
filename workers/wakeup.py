"""The wake-up thread: turns the store's ready-job notices into a claim.

It blocks on ``store.wakeups(queues)`` (Redis Pub/Sub, PostgreSQL LISTEN)
and calls ``on_notice`` (the claim loop's wake-up) for each notice, so an
idle worker claims a new job within a round trip instead of at its next
poll (5 -> 200 ms backoff). While the store is unreachable it retries with
a backoff (0.1 -> 5 s); the claim loop keeps polling meanwhile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from store.base import Wakeups
from workers.claim import IdleBackoff

log = logging.getLogger(__name__)

#: Seconds one wait blocks before the thread checks whether it should stop.
WAIT_S = 1.0


class WakeupListener(threading.Thread):
    """Listens for one worker process; ``stop()`` ends it."""

    def __init__(self, wakeups: Wakeups, on_notice: Callable[[], None], worker_id: str) -> None:
        super().__init__(name="leasehold-wakeup", daemon=True)
        self.wakeups = wakeups
        self.on_notice = on_notice
        self.worker_id = worker_id
        self._stop_event = threading.Event()
        self._errors = IdleBackoff(0.1, 5.0)

    def stop(self) -> None:
        self._stop_event.set()
        try:
            self.wakeups.close()
        except Exception:  # closing a broken connection may fail; the thread is a daemon
            log.debug("closing the wake-up subscription failed", exc_info=True)

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                if self.wakeups.wait(WAIT_S):
                    self.on_notice()
                self._errors.reset()
            except Exception as exc:  # the store may come back; the claim loop polls meanwhile
                if self._stop_event.is_set():
                    return
                log.info("worker %s: wake-up channel unavailable (%s); polling", self.worker_id, exc)
                self._stop_event.wait(self._errors.next())
