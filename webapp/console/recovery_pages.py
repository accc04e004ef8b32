"""The console's "Recover stuck jobs": one bounded run of ``store.recovery_run.run_recovery``.

The lock owner is ``recovery:<name>#<random>``: unique per run (two tabs of
one operator never share the lock), and recover_expired records it as the
actor of every job it changes, so each job's timeline shows who recovered
it. It is no ``operator:`` actor: the audit log gets one entry for the run
(recorded with trigger ``operator:<name>``), not one a job.
"""

from __future__ import annotations

import uuid

from store.base import JobStore
from store.models import RecoveryReport
from store.recovery_run import RecoveryBusy, run_recovery
from webapp.console.blueprint import settings

#: Most batches one console run takes (each at most LEASEHOLD_RECOVERY_BATCH
#: leases), so a request has a bound; the page says when more remain.
MAX_BATCHES = 20

LockHeld = RecoveryBusy


def operator_name(actor: str) -> str:
    """``operator:ann#1f2e3d4c`` or ``recovery:ann#1f2e3d4c`` -> ``ann`` (the
    name an actor string stands for)."""
    return actor.removeprefix("operator:").removeprefix("recovery:").split("#", 1)[0]


def run(store: JobStore, actor: str) -> RecoveryReport:
    """Recover expired leases now under the recovery lock. Raises RecoveryBusy
    when another instance holds the lock."""
    cfg = settings()
    return run_recovery(
        store,
        owner=f"recovery:{operator_name(actor)}#{uuid.uuid4().hex[:8]}",
        trigger=actor,
        batch=cfg.recovery_batch,
        lock_ttl_s=cfg.recovery_lock_ttl_s,
        max_batches=MAX_BATCHES,
    )
