"""Store maintenance: retention of finished jobs and audit entries, pruning
of dead workers: the operations a worker's service thread
(workers/services.py), the console, the API and the command call.

Store-side orchestration over the JobStore contract, like ``store.recovery_run``:
the worker's service, the CLI and the web app all import it from here.

``run_retention`` takes the lock ``RETENTION_LOCK`` (one instance at a time),
deletes each finished status whose retention is > 0 in bounded batches
(``store.purge``, each batch its own atomic change), extends the lock between
batches, releases it and records the run (``MaintenanceRun`` task
``retention``: jobs pruned, duration, longest batch). A batch's size adapts so
that one batch holds the store about ``BATCH_TARGET_MS``: it halves after a
slow batch and grows after a fast one, within [MIN_BATCH, MAX_BATCH], so no
batch holds the store near the 50 ms the issue allows, whatever the store and
its load.

``run_audit_retention`` deletes audit entries older than their own
retention (LEASEHOLD_RETENTION_AUDIT) in batches under the lock
``AUDIT_LOCK`` and records task ``audit``; ``prune_closed_failures`` deletes
the closed failure windows of login throttling (no lock: idempotent).

``run_worker_pruning`` removes registry entries whose heartbeat is older than
``forget_after_s`` (``store.prune_workers``), logs one line per worker and
records task ``workers``, under the lock ``WORKERS_LOCK``.

Every run holds its lock as its own owner (``RunLock``: who runs it plus a
random suffix), so two runs by one actor (one API token, one worker id) never
share a lock: the second is refused while the first runs, and neither can
release the other's lock.

The service (``MaintenanceService``, started by each worker) runs both every
``interval_s`` (jittered by up to 10%). However many workers run it, a task
runs once or twice per interval in all: each run takes the task's lock and
then skips (returns None, records nothing) when the task's last recorded run
finished less than half an interval ago (store clock), so the history shows
about one run per interval, zero counts included (the console can tell
retention is alive).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from store.base import JobStore
from store.lifecycle import TERMINAL, JobStatus
from store.models import MaintenanceRun, ts

log = logging.getLogger(__name__)

#: Lock names (``store.acquire_lock``) and task names of the runs.
RETENTION_LOCK = "retention"
WORKERS_LOCK = "workers"
AUDIT_LOCK = "audit"
RETENTION_TASK = "retention"
WORKERS_TASK = "workers"
AUDIT_TASK = "audit"
#: How long audit entries are kept by default, seconds (LEASEHOLD_RETENTION_AUDIT: 90 days).
AUDIT_RETENTION_S = 90 * 86400.0

#: First batch of a retention run (jobs per ``store.purge``).
DEFAULT_BATCH = 100
#: Bounds of the adaptive batch.
MIN_BATCH = 25
MAX_BATCH = 1000
#: Time one batch aims to hold the store, milliseconds (the issue allows 50).
BATCH_TARGET_MS = 20.0
#: Lease of a maintenance lock, seconds; extended between batches.
LOCK_TTL_S = 60.0
#: Longest lock owner every store keeps (the SQL column's width), characters.
LOCK_OWNER_MAX = 200
#: A service run is skipped when the task's last run finished less than this
#: fraction of the interval ago (another instance ran it).
RECENT_FRACTION = 0.5


class MaintenanceBusy(Exception):
    """Another instance holds the task's lock."""

    def __init__(self, task: str, holder: str | None) -> None:
        super().__init__(
            f"{task} maintenance is already running (lock held by {holder or 'another instance'})"
        )
        self.task = task
        self.holder = holder


@dataclass(slots=True)
class _Batches:
    """Adaptive batch size and the longest batch so far (ms)."""

    size: int
    longest_ms: float = 0.0
    count: int = 0

    def took(self, ms: float) -> None:
        self.count += 1
        self.longest_ms = max(self.longest_ms, ms)
        if ms > BATCH_TARGET_MS:
            self.size = max(MIN_BATCH, self.size // 2)
        elif ms < BATCH_TARGET_MS / 2:
            self.size = min(MAX_BATCH, self.size * 2)


def run_owner(who: str) -> str:
    """A lock owner unique to one run by ``who``: ``<who>#<12 hex digits>``
    (``who`` shortened to fit LOCK_OWNER_MAX)."""
    suffix = f"#{uuid.uuid4().hex[:12]}"
    return who[: LOCK_OWNER_MAX - len(suffix)] + suffix


class RunLock:
    """The lock ``name`` held by one run of task ``task`` started by ``who``,
    as its own owner (``run_owner``): ``acquire`` raises MaintenanceBusy
    while anyone else holds it (another run by the same ``who`` included),
    ``extend`` renews it between batches, ``release`` frees it only if this
    run still holds it. A context manager: acquired on entry, released on exit."""

    def __init__(self, store: JobStore, name: str, task: str, who: str, ttl_s: float) -> None:
        self.store = store
        self.name = name
        self.task = task
        self.owner = run_owner(who)
        self.ttl_s = ttl_s

    def acquire(self) -> RunLock:
        """Take the lock for ``ttl_s`` seconds. Raises MaintenanceBusy (with
        the holder) when it is held, and the store's errors."""
        if not self.store.acquire_lock(self.name, self.owner, self.ttl_s):
            raise MaintenanceBusy(self.task, self.store.lock_info(self.name).owner)
        return self

    def extend(self) -> bool:
        """Renew the lock for ``ttl_s`` seconds; False when this run lost it
        (it expired and someone else took it): the run should stop."""
        return self.store.acquire_lock(self.name, self.owner, self.ttl_s)

    def release(self) -> None:
        """Free the lock if this run holds it (a failure is logged: it expires)."""
        _release(self.store, self.name, self.owner)

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *_exc: object) -> None:
        self.release()


def _ran_recently(store: JobStore, task: str, within_s: float | None) -> bool:
    if within_s is None:
        return False
    last = store.maintenance_runs(task, limit=1)
    return bool(last) and store.now() - last[0].finished_at.timestamp() < within_s


def _release(store: JobStore, lock: str, owner: str) -> None:
    try:
        store.release_lock(lock, owner)
    except Exception as exc:  # the lock expires by itself; do not hide the run's result
        log.warning("releasing the %s lock failed: %s", lock, exc)


def _record(
    store: JobStore, task: str, owner: str, count: int, duration_ms: float, longest_ms: float
) -> MaintenanceRun:
    finished = store.now()
    run = MaintenanceRun(
        id=str(uuid.uuid4()),
        task=task,
        started_at=ts(finished - duration_ms / 1000),  # type: ignore[arg-type]
        finished_at=ts(finished),  # type: ignore[arg-type]
        owner=owner,
        count=count,
        duration_ms=duration_ms,
        longest_batch_ms=longest_ms,
    )
    try:
        store.record_maintenance_run(run)
    except Exception as exc:  # the pruning itself is done; history is best effort
        log.warning("recording the %s run failed: %s", task, exc)
    return run


def run_retention(
    store: JobStore,
    retention_s: Mapping[JobStatus, float],
    owner: str,
    batch: int = DEFAULT_BATCH,
    *,
    lock_ttl_s: float = LOCK_TTL_S,
    skip_if_ran_within_s: float | None = None,
) -> MaintenanceRun | None:
    """Delete finished jobs older than their status's retention; returns the
    recorded run (``count``: jobs deleted).

    retention_s: seconds each finished status is kept (LEASEHOLD_RETENTION_*);
        0 (or a status left out) keeps that status forever.
    owner: who runs it (a worker id, ``cli:host:pid``, ``operator:name``):
        the run's owner in the history; the lock's owner is this run's own
        (``RunLock``), so another run by the same owner is refused.
    batch: first batch size; it then adapts to BATCH_TARGET_MS per batch.
    lock_ttl_s: lock lease, renewed between batches.
    skip_if_ran_within_s: return None, recording nothing, when the last
        retention run finished less than this many seconds ago.

    Raises MaintenanceBusy when another instance holds the lock, ValueError
    for a non-finished status, and the store's errors. The lock is always
    released."""
    if not set(retention_s) <= TERMINAL:
        raise ValueError(
            f"retention applies to finished jobs only, not {sorted(s.name for s in retention_s)}"
        )
    lock = RunLock(store, RETENTION_LOCK, RETENTION_TASK, owner, lock_ttl_s).acquire()
    t0 = time.perf_counter()
    batches = _Batches(max(MIN_BATCH, min(MAX_BATCH, batch)))
    pruned = 0
    try:
        if _ran_recently(store, RETENTION_TASK, skip_if_ran_within_s):
            return None
        plan = sorted(
            ((s, keep_s) for s, keep_s in retention_s.items() if keep_s > 0), key=lambda p: p[0].value
        )
        for status, keep_s in plan:
            deleted = -1
            while deleted != 0:
                if batches.count and not lock.extend():  # renewed before every batch after the first
                    log.warning("retention by %s lost its lock after %d job(s); stopping", owner, pruned)
                    break
                b0 = time.perf_counter()
                deleted = store.purge(keep_s, limit=batches.size, statuses=[status])
                batches.took((time.perf_counter() - b0) * 1000)
                pruned += deleted
            if deleted != 0:  # the lock was lost
                break
    finally:
        lock.release()
    duration_ms = (time.perf_counter() - t0) * 1000
    if pruned:
        log.info(
            "retention by %s: %d finished job(s) pruned in %.0f ms (longest batch %.1f ms)",
            owner,
            pruned,
            duration_ms,
            batches.longest_ms,
        )
    return _record(store, RETENTION_TASK, owner, pruned, duration_ms, batches.longest_ms)


def run_worker_pruning(
    store: JobStore,
    forget_after_s: float,
    owner: str,
    *,
    lock_ttl_s: float = LOCK_TTL_S,
    skip_if_ran_within_s: float | None = None,
) -> list[str] | None:
    """Remove workers whose registry heartbeat is older than ``forget_after_s``
    seconds (LEASEHOLD_WORKER_FORGET_AFTER); returns their ids, logs one line
    for each and records a run (task ``workers``). None when skipped
    (``skip_if_ran_within_s``, as in ``run_retention``).

    Raises MaintenanceBusy when another instance holds the lock, and the
    store's errors. The lock is always released."""
    t0 = time.perf_counter()
    with RunLock(store, WORKERS_LOCK, WORKERS_TASK, owner, lock_ttl_s):
        if _ran_recently(store, WORKERS_TASK, skip_if_ran_within_s):
            return None
        removed = store.prune_workers(forget_after_s)
    duration_ms = (time.perf_counter() - t0) * 1000
    for worker_id in removed:
        log.info(
            "worker %s forgotten: no heartbeat for more than %gs (by %s)", worker_id, forget_after_s, owner
        )
    _record(store, WORKERS_TASK, owner, len(removed), duration_ms, duration_ms)
    return removed


def run_audit_retention(
    store: JobStore,
    retention_s: float,
    owner: str,
    *,
    lock_ttl_s: float = LOCK_TTL_S,
    skip_if_ran_within_s: float | None = None,
) -> MaintenanceRun | None:
    """Delete audit entries older than ``retention_s`` seconds
    (LEASEHOLD_RETENTION_AUDIT; 0 keeps them forever: nothing is done, None)
    in batches of MAX_BATCH (``store.prune_audit``), extending the lock
    between batches, and record a run (task ``audit``, ``count``: entries
    deleted). None when skipped (``skip_if_ran_within_s``, as in
    ``run_retention``).

    Raises MaintenanceBusy when another instance holds the lock, and the
    store's errors. The lock is always released."""
    if retention_s <= 0:
        return None
    if not store.acquire_lock(AUDIT_LOCK, owner, lock_ttl_s):
        raise MaintenanceBusy(AUDIT_TASK, store.lock_info(AUDIT_LOCK).owner)
    t0, longest_ms, pruned = time.perf_counter(), 0.0, 0
    try:
        if _ran_recently(store, AUDIT_TASK, skip_if_ran_within_s):
            return None
        while True:
            b0 = time.perf_counter()
            deleted = store.prune_audit(retention_s, limit=MAX_BATCH)
            longest_ms = max(longest_ms, (time.perf_counter() - b0) * 1000)
            pruned += deleted
            if deleted < MAX_BATCH or not store.acquire_lock(AUDIT_LOCK, owner, lock_ttl_s):
                break
    finally:
        _release(store, AUDIT_LOCK, owner)
    duration_ms = (time.perf_counter() - t0) * 1000
    if pruned:
        log.info("audit retention by %s: %d entries older than %gs pruned", owner, pruned, retention_s)
    return _record(store, AUDIT_TASK, owner, pruned, duration_ms, longest_ms)


def prune_closed_failures(store: JobStore) -> int:
    """Delete every closed failure window (login throttling) in batches of
    MAX_BATCH; how many went. Idempotent, so it needs no lock."""
    pruned = 0
    while (deleted := store.prune_failures(MAX_BATCH)) > 0:
        pruned += deleted
        if deleted < MAX_BATCH:
            break
    return pruned
