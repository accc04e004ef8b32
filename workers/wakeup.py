"""The wake-up thread: turns the store's ready-job notices into a claim.

It blocks on ``store.wakeups(queues)`` (Redis wake-up lists, PostgreSQL
LISTEN) and posts each notice with ``on_notice(notice)`` (to the main
thread's inbox, ``workers.inbox``; False once it takes nothing more, and the
notice is given back), so an idle worker claims a new job within a round
trip instead of at its next poll (5 -> 200 ms backoff). It waits only while ``wanted()`` (the
worker has a free slot): Redis hands each notice to one waiting worker, so a
full worker must not take them; one that filled up while it waited gives the
notice back (``Wakeups.give_back``; a job handed over to it is released).
While it has no free slot it also takes back its registration for
hand-over (``Wakeups.withdraw``), so no enqueue leases to a full worker.
``nudge()`` (a slot freed) ends a wait for a free slot at once. While the
store is unreachable it retries with a backoff (0.1 -> 5 s); the claim loop keeps polling meanwhile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from store.notices import Notice, Wakeups
from workers.claim import IdleBackoff

log = logging.getLogger(__name__)

#: Seconds one wait blocks before the thread checks whether it should stop.
WAIT_S = 1.0


class WakeupListener(threading.Thread):
    """Listens for one worker process; ``stop()`` ends it."""

    def __init__(
        self,
        wakeups: Wakeups,
        on_notice: Callable[[Notice], bool],
        worker_id: str,
        wanted: Callable[[], bool] = lambda: True,
    ) -> None:
        super().__init__(name="leasehold-wakeup", daemon=True)
        self.wakeups = wakeups
        self.wanted = wanted
        self._nudged = threading.Event()
        self.on_notice = on_notice
        self.worker_id = worker_id
        self._stop_event = threading.Event()
        self._errors = IdleBackoff(0.1, 5.0)

    def nudge(self) -> None:
        """A slot freed: stop waiting for one (thread-safe)."""
        self._nudged.set()

    def withdraw(self) -> None:
        """Take the worker's hand-over registration back now (it went quiet;
        thread-safe); the thread does not register again while it is not
        ``wanted``."""
        try:
            self.wakeups.withdraw()
        except Exception as exc:  # the registration expires on its own
            log.info("worker %s: withdrawing from hand-over failed: %s", self.worker_id, exc)

    def stop(self) -> None:
        self._stop_event.set()
        self._nudged.set()
        try:
            self.wakeups.close()
        except Exception:  # closing a broken connection may fail; the thread is a daemon
            log.debug("closing the wake-up subscription failed", exc_info=True)

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                if not self.wanted():
                    self.wakeups.withdraw()
                    self._nudged.wait(WAIT_S)
                    self._nudged.clear()
                    continue
                notice = self.wakeups.wait(WAIT_S)
                if notice is None:
                    pass
                elif not (self.wanted() and self.on_notice(notice)):
                    self.wakeups.give_back(notice)
                self._errors.reset()
            except Exception as exc:  # the store may come back; the claim loop polls meanwhile
                if self._stop_event.is_set():
                    return
                log.info("worker %s: wake-up channel unavailable (%s); polling", self.worker_id, exc)
                self._stop_event.wait(self._errors.next())
