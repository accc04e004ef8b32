"""The worker's service threads for the operations of store/recovery_run.py and
store/maintenance.py: recovery of expired leases (a drain at start, then one
bounded run every interval) and maintenance (retention, worker pruning, audit
retention, history trimming, failure windows, the lines of deleted jobs' logs, and bulk operations as soon as
they are started). ``workers.worker.Worker`` starts and stops them
(docs/architecture.md, "Worker threads"); operators call the same operations
from the console, the API and the command.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Mapping

from store import bulk
from store.alerts_delivery import Deliverer
from store.alerts_eval import evaluate
from store.base import JobStore
from store.job_logs import sweep_logs
from store.lifecycle import JobStatus
from store.maintenance import (
    AUDIT_RETENTION_S,
    LOCK_TTL_S,
    RECENT_FRACTION,
    MaintenanceBusy,
    prune_closed_failures,
    run_audit_retention,
    run_retention,
    run_worker_pruning,
)
from store.models import RecoveryReport
from store.recovery_run import INTERVAL_MAX_BATCHES, RecoveryBusy, run_recovery

log = logging.getLogger(__name__)


class RecoveryService(threading.Thread):
    """Runs recovery in one worker process: ``drain()`` at start, then every interval."""

    def __init__(self, store: JobStore, owner: str, interval_s: float, batch: int, lock_ttl_s: float) -> None:
        super().__init__(name="leasehold-recovery", daemon=True)
        self.store = store
        self.owner = owner
        self.interval_s = interval_s
        self.batch = batch
        self.lock_ttl_s = lock_ttl_s
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()

    def drain(self) -> RecoveryReport | None:
        """Start-up: recover until no expired lease is left (skipped when another instance is at it)."""
        return self.tick("startup", max_batches=None)

    def tick(self, trigger: str, max_batches: int | None = INTERVAL_MAX_BATCHES) -> RecoveryReport | None:
        """One run if any lease has expired; None when there was nothing to do or it could not run."""
        try:
            if self.store.expired_lease_count() == 0:
                return None
            return run_recovery(
                self.store, self.owner, trigger, self.batch, self.lock_ttl_s, max_batches=max_batches
            )
        except RecoveryBusy as exc:
            log.debug("%s", exc)
        except Exception as exc:  # keep the service alive; the next interval retries
            log.warning("recovery (%s) failed: %s", trigger, exc)
        return None

    def run(self) -> None:
        while not self._stop_event.wait(self.interval_s * random.uniform(0.9, 1.0)):
            self.tick("interval")


#: How often the maintenance thread looks for bulk operations to run, seconds
#: (an operator waits at most about this long for one to start).
BULK_POLL_S = 1.0
#: Time one look may spend on bulk operations before the thread moves on, seconds.
BULK_BUDGET_S = 5.0
#: Seconds between two alert passes at most (the maintenance interval when shorter).
ALERT_INTERVAL_S = 10.0


class MaintenanceService(threading.Thread):
    """Runs retention (finished jobs, then audit entries older than
    ``audit_retention_s``), worker pruning, history trimming and the pruning
    of closed failure windows in one worker process every interval, bulk
    operations (store/bulk.py) as soon as they are started (checked every
    BULK_POLL_S), and the alert rules (store/alerts_eval.py) every
    ``alert_interval_s``, their firings handed to a delivery thread
    (store/alerts_delivery.py) so no webhook ever holds this thread."""

    def __init__(
        self,
        store: JobStore,
        owner: str,
        interval_s: float,
        retention_s: Mapping[JobStatus, float],
        forget_after_s: float,
        audit_retention_s: float = AUDIT_RETENTION_S,
    ) -> None:
        super().__init__(name="leasehold-maintenance", daemon=True)
        self.store = store
        self.owner = owner
        self.interval_s = interval_s
        self.retention_s = dict(retention_s)
        self.forget_after_s = forget_after_s
        self.audit_retention_s = audit_retention_s
        self.alert_interval_s = min(interval_s, ALERT_INTERVAL_S)
        self.deliverer = Deliverer(store)
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()
        self.deliverer.stop()

    def tick_alerts(self) -> int:
        """One pass over the alert rules; its firings are queued for delivery
        (the delivery thread starts with the first). How many; errors logged."""
        try:
            firings = evaluate(self.store, self.owner) or []
        except Exception as exc:  # the next pass retries
            log.warning("evaluating alerts failed: %s", exc)
            return 0
        for firing in firings:
            if self.deliverer.ident is None and not self._stop_event.is_set():
                self.deliverer.start()
            self.deliverer.submit(firing)
        return len(firings)

    def tick(self) -> None:
        """One pass of every task; errors are logged, never raised."""
        locked = {
            "lock_ttl_s": max(LOCK_TTL_S, self.interval_s),
            "skip_if_ran_within_s": self.interval_s * RECENT_FRACTION,
        }
        tasks = (
            ("retention", lambda: run_retention(self.store, self.retention_s, self.owner, **locked)),
            (
                "pruning dead workers",
                lambda: run_worker_pruning(self.store, self.forget_after_s, self.owner, **locked),
            ),
            (
                "audit retention",
                lambda: run_audit_retention(self.store, self.audit_retention_s, self.owner, **locked),
            ),
        )
        for what, task in tasks:  # each under its own lock; one failing never stops the others
            try:
                task()
            except MaintenanceBusy as exc:
                log.debug("%s", exc)
            except Exception as exc:  # keep the service alive; the next interval retries
                log.warning("%s failed: %s", what, exc)
        try:
            self.store.trim_history()
            prune_closed_failures(self.store)
            sweep_logs(self.store)
        except Exception as exc:
            log.warning("trimming the history counters, failure windows or job logs failed: %s", exc)

    def run_bulk(self) -> None:
        """Run started bulk operations for up to BULK_BUDGET_S; errors logged."""
        try:
            if self.store.operations(limit=1, unfinished=True):
                bulk.run_pending(self.store, self.owner, BULK_BUDGET_S)
        except Exception as exc:  # the next look resumes from the saved cursor
            log.warning("bulk operations failed: %s", exc)

    def run(self) -> None:
        next_tick = time.monotonic() + self.interval_s * random.uniform(0.9, 1.0)
        next_alerts = time.monotonic() + self.alert_interval_s * random.uniform(0.5, 1.0)
        while not self._stop_event.wait(
            min(BULK_POLL_S, max(0.0, min(next_tick, next_alerts) - time.monotonic()))
        ):
            self.run_bulk()
            if time.monotonic() >= next_alerts:
                self.tick_alerts()
                next_alerts = time.monotonic() + self.alert_interval_s * random.uniform(0.9, 1.0)
            if time.monotonic() >= next_tick:
                self.tick()
                next_tick = time.monotonic() + self.interval_s * random.uniform(0.9, 1.0)
