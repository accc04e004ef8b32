"""The heartbeat thread: renews every lease the worker holds, in one call.

Every third of the shortest lease in hand it sends one
batched ``store.heartbeat(worker_id, leases, ttl)`` for every run it holds a
lease for: running, waiting for a slot, or finished with its ack still queued
(``InFlight.leased``). A refused lease (stale token, job canceled, lease
already expired) is dropped: its ``ctx.cancelled`` is set and its slot is
told to stop. A deferred one (its row held by another transaction) is simply
renewed at the next beat. The same tick refreshes the worker's
registry entry (``store.worker_heartbeat``) and hands the worker an
operator's command found there (quiet, stop) once, and ``unquiet`` when a
quiet it handed over is gone from the entry (an operator took it back). A
store error skips one beat and retries sooner; the thread never dies on it.

At shutdown (``stop(leave=True)``) the thread's last act, after its last
beat has returned, is to remove the worker's registry entry: a beat still in
flight cannot register a removed worker again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from store.base import JobStore
from store.models import WorkerInfo
from workers.inflight import InFlight, Running, State

log = logging.getLogger(__name__)


class Heartbeat(threading.Thread):
    """Background lease renewal for one worker process."""

    def __init__(
        self,
        store: JobStore,
        info: WorkerInfo,
        inflight: InFlight,
        lease_ttl_s: float,
        on_refused: Callable[[Running], None],
        on_command: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(name="leasehold-heartbeat", daemon=True)
        self.store = store
        self.info = info
        self.inflight = inflight
        self.lease_ttl_s = lease_ttl_s
        self.on_refused = on_refused
        self.on_command = on_command
        #: The operator's command last handed to ``on_command`` (each is handed once).
        self.command: str | None = None
        self._stop_event = threading.Event()
        self._kick = threading.Event()
        self._leave = False

    def interval_s(self) -> float:
        """A third of the shortest lease in hand (a job may carry its own TTL)."""
        ttls = [self.lease_ttl_s]
        ttls += [r.job.lease_ttl_seconds for r in self.inflight.leased() if r.job.lease_ttl_seconds]
        return min(ttls) / 3

    def stop(self, *, leave: bool = False) -> None:
        """Stop beating (thread-safe). ``leave``: then remove the worker's
        registry entry, from this thread, after its last beat."""
        self._leave = self._leave or leave
        self._stop_event.set()
        self._kick.set()

    def kick(self) -> None:
        """Beat now (a new job was claimed with a shorter TTL, or the jobs changed)."""
        self._kick.set()

    def run(self) -> None:
        while not self._stop_event.is_set():
            started = time.monotonic()
            ok = self.beat()
            wait = self.interval_s() if ok else min(1.0, self.interval_s() / 3)
            remaining = wait - (time.monotonic() - started)
            if remaining > 0:
                self._kick.wait(remaining)
            self._kick.clear()
        if self._leave:
            self.leave_registry(self.store, self.info.id)

    @staticmethod
    def leave_registry(store: JobStore, worker_id: str) -> None:
        """Remove the worker's registry entry (a failure is logged: the entry
        then ages out like a dead worker's)."""
        try:
            store.remove_worker(worker_id)
        except Exception as exc:
            log.warning("worker %s: leaving the registry failed: %s", worker_id, exc)

    def beat(self) -> bool:
        """Renew the leases in hand and refresh the registry; False on a store error."""
        try:
            self.renew()
            self.info.jobs_in_hand = [r.job.id for r in self.inflight.leased()]
            command = self.store.worker_heartbeat(self.info)
            if command != self.command:
                handed = command or ("unquiet" if self.command == "quiet" else None)
                self.command = command
                if handed is not None and self.on_command is not None:
                    self.on_command(handed)
            return True
        except Exception as exc:  # keep beating: the next beat may reach the store
            log.warning("heartbeat of worker %s failed: %s", self.info.id, exc)
            return False

    def renew(self) -> None:
        runs = self.inflight.leased()
        if not runs:
            return
        result = self.store.heartbeat(self.info.id, [r.lease for r in runs], self.lease_ttl_s)
        for lease in result.refused:
            run = self.inflight.get(lease)
            if run is not None and run.move(State.DROPPED):
                log.info("lease on job %s (token %s) was refused; stopping it", lease.job_id, lease.token)
                self.on_refused(run)
