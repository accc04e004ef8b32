"""The worker runs maintenance: a real worker
process prunes old finished jobs and forgets dead workers, and records both."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from store.lifecycle import JobStatus
from store.models import WorkerInfo
from tests.backends import StoreHandle
from tests.store.helpers import job_in
from tests.workers.procs import Spawner, wait_until
from workers.config import WorkerConfig

S = JobStatus


def test_worker_config_carries_the_maintenance_settings() -> None:
    config = WorkerConfig(
        "sqlite:///x.db",
        maintenance_enabled=True,
        maintenance_interval_s=5.0,
        retention_s=(("Completed", 60.0), ("Canceled", 0.0)),
        worker_forget_after_s=400.0,
    )
    back = WorkerConfig.from_json(config.to_json())
    assert back == config
    assert back.retention == {S.Completed: 60.0, S.Canceled: 0.0}


@pytest.mark.slow
def test_a_worker_prunes_old_jobs_and_forgets_dead_workers(handle: StoreHandle, spawn: Spawner) -> None:
    store = handle.store
    store.clock_offset_s = -60.0  # these happened a minute ago (store clock)
    old = job_in(store, S.Completed)
    failed = job_in(store, S.Failed)
    store.worker_heartbeat(
        WorkerInfo(
            id="dead-1", host="h", pid=1, queues=["default"], concurrency=1, started_at=datetime.now(UTC)
        )
    )
    store.clock_offset_s = 0.0
    young = job_in(store, S.Completed)
    proc = spawn.worker(
        name="keeper",
        env={
            "LEASEHOLD_MAINTENANCE_INTERVAL": "0.2",
            "LEASEHOLD_RETENTION_COMPLETED": "30",
            "LEASEHOLD_RETENTION_FAILED": "0",
            "LEASEHOLD_WORKER_FORGET_AFTER": "30",
        },
    )
    runs = wait_until(lambda: store.maintenance_runs("retention"), what="a retention run")
    assert (runs[-1].owner, runs[-1].count) == ("keeper", 1)
    wait_until(lambda: "dead-1" not in {w.id for w in store.workers()}, what="dead-1 forgotten")
    assert "keeper" in {w.id for w in store.workers()}
    workers_runs = wait_until(lambda: store.maintenance_runs("workers"), what="a workers run")
    assert (workers_runs[-1].owner, workers_runs[-1].count) == ("keeper", 1)
    ids = {j.id for j in store.list_jobs(limit=50).items}
    assert old.id not in ids and {failed.id, young.id} <= ids  # Failed kept forever (0)
    wait_until(lambda: "worker dead-1 forgotten" in proc.log(), timeout=10, what="the log line")


@pytest.mark.slow
def test_a_worker_runs_a_bulk_operation_started_elsewhere(handle: StoreHandle, spawn: Spawner) -> None:
    from store import bulk

    store = handle.store
    ids = [job_in(store, S.Failed).id for _ in range(30)]
    spawn.worker(name="bulk-runner", env={"LEASEHOLD_MAINTENANCE_INTERVAL": "60"})
    op = bulk.start(store, "requeue", {"status": "Failed"}, "operator:ann", expected=30)
    done = wait_until(lambda: (o := store.get_operation(op.id)) and o.finished and o, what="the operation")
    assert (done.state, done.changed) == ("done", 30)
    # The worker has no handler "t": it gives the requeued jobs back (Scheduled) within the grace.
    assert {store.get(i).status for i in ids} <= {S.Queued, S.Scheduled, S.InProgress, S.Completed, S.Failed}
    assert all(any(e.kind == "requeued" for e in store.events(i)) for i in ids)
