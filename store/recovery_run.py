"""Recovery of expired leases: the operations a worker's service thread
(workers/services.py), the console, the API and the command call.

Store-side orchestration over the JobStore contract (no worker or web code):
the worker, the CLI, the API and the console all import it from here.

``run_recovery`` is the one entry point: the worker's background service,
the ``recover`` command, the API and the console's "Recover stuck jobs" all
call it. A real run takes the distributed lock ``store.base.RECOVERY_LOCK``,
recovers in bounded batches (``store.recover_expired``, each batch its own
atomic change), extends the lock between batches, releases it, and records
the run (``store.record_recovery_run``). A dry run is ``store.preview_recovery``:
no lock, no change, nothing recorded.

The service (``RecoveryService``) drains at worker start-up until no expired
lease is left, then every ``interval`` (jittered by up to 10% so workers do
not run in lockstep) checks ``store.expired_lease_count()`` (an index range
read) and runs at most ``max_batches`` batches when there is work. So an
expired lease is recovered within about ``interval`` of expiring while any
worker with recovery enabled is up. Idle checks are not recorded as runs.
"""

from __future__ import annotations

import logging
import time
import uuid

from store.base import RECOVERY_LOCK, JobStore
from store.models import RecoveryReport, RecoveryRun, ts

log = logging.getLogger(__name__)

#: Batches one periodic run may take before yielding to the next interval.
INTERVAL_MAX_BATCHES = 10
#: Seconds between attempts to take a busy lock, when a caller waits for it.
LOCK_RETRY_S = 0.05


class RecoveryBusy(Exception):
    """Another instance holds the recovery lock."""

    def __init__(self, holder: str | None) -> None:
        super().__init__(f"recovery is already running (lock held by {holder or 'another instance'})")
        self.holder = holder


def _take_lock(store: JobStore, owner: str, lock_ttl_s: float, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    while not store.acquire_lock(RECOVERY_LOCK, owner, lock_ttl_s):
        if time.monotonic() >= deadline:
            raise RecoveryBusy(store.lock_info(RECOVERY_LOCK).owner)
        time.sleep(LOCK_RETRY_S)


def run_recovery(
    store: JobStore,
    owner: str,
    trigger: str,
    batch: int,
    lock_ttl_s: float,
    dry_run: bool = False,
    *,
    max_batches: int | None = None,
    wait_s: float = 0.0,
    record: bool = True,
) -> RecoveryReport:
    """Recover expired leases; returns the totals of every batch.

    owner: who holds the lock (a worker id, ``cli:host:pid``, ``operator:name``).
    trigger: recorded with the run: ``startup``, ``interval``, ``cli`` or an operator's name.
    batch: most leases per batch (LEASEHOLD_RECOVERY_BATCH).
    lock_ttl_s: lock lease, renewed between batches (LEASEHOLD_RECOVERY_LOCK_TTL).
    dry_run: preview one batch with ``store.preview_recovery`` (no lock, no change).
    max_batches: stop after this many batches (None: until none are left);
        ``more`` in the report says whether expired leases may remain.
    wait_s: how long to wait for a busy lock before giving up.
    record: record the run in the recovery history.

    Raises RecoveryBusy when another instance holds the lock for ``wait_s``,
    and the store's errors (StoreUnavailable...). The lock is always released.
    """
    if dry_run:
        return store.preview_recovery(batch)
    _take_lock(store, owner, lock_ttl_s, wait_s)
    t0 = time.perf_counter()
    recovered, failed, more, batches = [], [], False, 0
    try:
        while True:
            report = store.recover_expired(batch, owner=owner)
            batches += 1
            recovered += report.recovered
            failed += report.failed
            more = report.more
            if not more or not (report.recovered or report.failed):
                break
            if max_batches is not None and batches >= max_batches:
                break
            if not store.acquire_lock(RECOVERY_LOCK, owner, lock_ttl_s):  # extend; lost if we paused too long
                log.warning("recovery by %s lost its lock after %d batches; stopping", owner, batches)
                break
    finally:
        try:
            store.release_lock(RECOVERY_LOCK, owner)
        except Exception as exc:  # the lock expires by itself; do not hide the run's result
            log.warning("releasing the recovery lock failed: %s", exc)
    duration_ms = (time.perf_counter() - t0) * 1000
    total = RecoveryReport(recovered, failed, dry_run=False, more=more, owner=owner, duration_ms=duration_ms)
    if recovered or failed:
        log.info("recovery by %s (%s): %d retried, %d failed", owner, trigger, len(recovered), len(failed))
    if record:
        _record(store, total, trigger)
    return total


def _record(store: JobStore, report: RecoveryReport, trigger: str) -> None:
    try:
        finished = store.now()
        run = RecoveryRun(
            id=str(uuid.uuid4()),
            started_at=ts(finished - report.duration_ms / 1000),  # type: ignore[arg-type]
            finished_at=ts(finished),  # type: ignore[arg-type]
            owner=report.owner or "?",
            trigger=trigger,
            recovered=len(report.recovered),
            failed=len(report.failed),
            duration_ms=report.duration_ms,
        )
        store.record_recovery_run(run)
    except Exception as exc:  # the recovery itself is done and atomic; history is best effort
        log.warning("recording the recovery run failed: %s", exc)
