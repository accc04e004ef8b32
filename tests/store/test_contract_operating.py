"""Contract: operating a store for months — unique jobs, queue pause and
resume (decided inside the claim), delete, retention by status, dead workers
pruned, maintenance runs and periodic-job schedules, on every store."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from store.base import JobStore
from store.errors import InvalidTransition, JobNotFound, ScheduleNotFound, ValidationError
from store.lifecycle import EventKind, JobStatus
from store.models import JobSpec, MaintenanceRun, Schedule, WorkerInfo
from tests.backends import StoreHandle
from tests.store import procs
from tests.store.helpers import ERROR, expire_leases, job_in

S = JobStatus


# ------------------------------------------------------------------ unique jobs
def test_unique_job_returns_the_active_job(store: JobStore) -> None:
    first = store.enqueue("report", {"day": 1}, unique_for=60)
    again, created = store.enqueue_idempotent(JobSpec("report", {"day": 1}, unique_for=60))
    assert (again.id, created) == (first.id, False)
    other = store.enqueue("report", {"day": 2}, unique_for=60)
    assert other.id != first.id
    assert store.counts().by_status["Queued"] == 2


def test_unique_key_held_while_running_then_for_unique_for(store: JobStore) -> None:
    job = store.enqueue("sync", None, unique_key="sync:acme", unique_for=30)
    [claimed] = store.claim("w", ["default"], 1)
    assert store.enqueue("sync", None, unique_key="sync:acme", unique_for=30).id == job.id
    store.complete(job.id, claimed.lease_token, None)
    # Finished but younger than unique_for: still the same job.
    assert store.enqueue("sync", None, unique_key="sync:acme", unique_for=30).id == job.id
    store.clock_offset_s += 31
    fresh = store.enqueue("sync", None, unique_key="sync:acme", unique_for=30)
    assert fresh.id != job.id and fresh.status is S.Queued


def test_unique_key_without_unique_for_is_held_only_while_active(store: JobStore) -> None:
    job = store.enqueue("sync", None, unique_key="k")
    store.cancel(job.id)
    assert store.enqueue("sync", None, unique_key="k").id != job.id


def test_unique_jobs_in_enqueue_many(store: JobStore) -> None:
    got = store.enqueue_many([JobSpec("a", {"n": 1}, unique_for=60), JobSpec("a", {"n": 1}, unique_for=60)])
    assert got[0].id == got[1].id


@pytest.mark.slow
def test_eight_processes_enqueue_one_unique_job(handle: StoreHandle) -> None:
    results = procs.run_children(procs.enqueue_unique, [(handle.url, "nightly", 125)] * 8)
    ids = {i for _, got, _ in results for i in got}
    assert len(ids) == 1
    assert handle.store.counts().by_status["Queued"] == 1


def test_bad_unique_options_are_refused(store: JobStore) -> None:
    with pytest.raises(ValidationError) as exc:
        store.enqueue("a", None, unique_for=-1)
    assert exc.value.field == "unique_for"


# ---------------------------------------------------------------- pause/resume
def test_a_paused_queue_is_never_claimed_from(store: JobStore) -> None:
    job = store.enqueue("t", None, queue="mail")
    other = store.enqueue("t", None, queue="default")
    state = store.pause_queue("mail", actor="operator:ann")
    assert (state.name, state.paused, state.changed_by) == ("mail", True, "operator:ann")
    assert [j.id for j in store.claim("w", ["mail", "default"], 10)] == [other.id]
    assert store.enqueue("t", None, queue="mail").status is S.Queued  # enqueue still works
    assert store.claim("w", ["mail"], 10) == []
    assert store.resume_queue("mail", actor="operator:ann").paused is False
    assert job.id in {j.id for j in store.claim("w", ["mail"], 10)}
    assert [(q.name, q.paused) for q in store.queue_states()] == [("mail", False)]
    kinds = [e.kind for e in store.audit()]
    assert kinds[:2] == [EventKind.QUEUE_RESUMED, EventKind.QUEUE_PAUSED]


def test_pausing_lets_running_jobs_finish(store: JobStore) -> None:
    store.enqueue("t")
    [running] = store.claim("w", ["default"], 1)
    store.pause_queue("default", actor="operator:ann")
    assert store.complete(running.id, running.lease_token, None).status is S.Completed


def test_a_due_retry_of_a_paused_queue_waits(store: JobStore) -> None:
    store.enqueue("t", max_retries=2)
    [c] = store.claim("w", ["default"], 1)
    store.fail(c.id, c.lease_token, ERROR)
    store.pause_queue("default", actor="operator:ann")
    store.clock_offset_s += 3600
    assert store.claim("w", ["default"], 1) == []
    store.resume_queue("default", actor="operator:ann")
    assert [j.id for j in store.claim("w", ["default"], 1)] == [c.id]


# ----------------------------------------------------------------------- delete
@pytest.mark.parametrize("status", list(S))
def test_delete_from_every_status(store: JobStore, status: JobStatus) -> None:
    job = job_in(store, status)
    before = store.counts().by_status[status.name]
    if status is S.InProgress:
        with pytest.raises(InvalidTransition):
            store.delete(job.id, actor="operator:ann")
        assert store.get(job.id).status is S.InProgress
        return
    store.delete(job.id, actor="operator:ann")
    with pytest.raises(JobNotFound):
        store.get(job.id)
    # Only operator actions may remain (the audit log outlives the job).
    assert all((e.actor or "").startswith("operator:") for e in store.events(job.id))
    assert store.counts().by_status[status.name] == before - 1
    [entry] = [e for e in store.audit() if e.kind == EventKind.DELETED]
    assert (entry.job_id, entry.actor) == (job.id, "operator:ann")
    with pytest.raises(JobNotFound):
        store.delete(job.id, actor="operator:ann")


def test_delete_frees_idempotency_and_unique_keys(store: JobStore) -> None:
    job = store.enqueue("t", None, idempotency_key="idem-1", unique_key="u-1", unique_for=3600)
    store.delete(job.id, actor="operator:ann")
    again = store.enqueue("t", None, idempotency_key="idem-1", unique_key="u-1", unique_for=3600)
    assert again.id != job.id


# -------------------------------------------------------------------- retention
def test_purge_by_status_and_age(store: JobStore) -> None:
    done = job_in(store, S.Completed)
    failed = job_in(store, S.Failed)
    canceled = job_in(store, S.Canceled)
    queued = store.enqueue("t", None, unique_key="u-2", unique_for=1)
    expire_leases(store, 120)
    assert store.count_purgeable(60, [S.Completed]) == 1
    assert store.purge(60, statuses=[S.Completed]) == 1
    with pytest.raises(JobNotFound):
        store.get(done.id)
    assert store.count_purgeable(600) == 0
    assert store.count_purgeable(60) == 2
    assert store.purge(60, limit=1) == 1
    assert store.purge(60) == 1
    for gone in (failed, canceled):
        with pytest.raises(JobNotFound):
            store.get(gone.id)
    assert store.get(queued.id).status is S.Queued
    with pytest.raises(ValidationError):
        store.purge(60, statuses=[S.Queued])


def test_purge_with_a_limit_takes_the_oldest_across_queues(store: JobStore) -> None:
    finished = []
    for queue in ("b", "a", "b", "a"):
        job = store.enqueue("t", None, queue=queue)
        finished.append(store.cancel(job.id).id)
        store.clock_offset_s += 10
    store.clock_offset_s += 120
    assert store.count_purgeable(60) == 4
    assert store.purge(60, limit=3) == 3
    left = store.list_jobs(status=S.Canceled).items
    assert [j.id for j in left] == finished[3:]


def test_purge_frees_unique_keys(store: JobStore) -> None:
    job = store.enqueue("t", None, unique_key="u-3", unique_for=1)
    store.cancel(job.id)
    store.clock_offset_s += 120
    assert store.purge(60) == 1
    assert store.enqueue("t", None, unique_key="u-3").id != job.id


# -------------------------------------------------------------------- workers
def _worker(worker_id: str) -> WorkerInfo:
    return WorkerInfo(worker_id, "host", 1, ["default"], 1, [], None, None)


def test_dead_workers_are_pruned(store: JobStore) -> None:
    store.worker_heartbeat(_worker("old"))
    store.clock_offset_s += 600
    store.worker_heartbeat(_worker("live"))
    assert store.prune_workers(300) == ["old"]
    assert [w.id for w in store.workers()] == ["live"]
    assert store.prune_workers(300) == []


# ------------------------------------------------------------- maintenance runs
def test_maintenance_runs_by_task_newest_first(store: JobStore) -> None:
    for i in range(3):
        at = datetime(2026, 1, 1, 0, i, tzinfo=UTC)
        store.record_maintenance_run(MaintenanceRun(f"r{i}", "retention", at, at, "me", i, 2.0, 1.0))
    store.record_maintenance_run(
        MaintenanceRun(
            "w0",
            "workers",
            datetime(2026, 1, 2, tzinfo=UTC),
            datetime(2026, 1, 2, tzinfo=UTC),
            "me",
            1,
            1.0,
            1.0,
        )
    )
    runs = store.maintenance_runs("retention", limit=2)
    assert [(r.id, r.count, r.longest_batch_ms) for r in runs] == [("r2", 2, 1.0), ("r1", 1, 1.0)]
    assert [r.id for r in store.maintenance_runs("workers")] == ["w0"]


# -------------------------------------------------------------------- schedules
def test_schedules_keep_what_operators_and_the_scheduler_set(store: JobStore) -> None:
    nightly = Schedule("nightly", "report", "0 3 * * *", "Europe/Paris", "default", {"full": True})
    store.save_schedules([nightly, Schedule("often", "ping", "* * * * *")])
    assert store.set_schedule_enabled("nightly", False).enabled is False
    store.record_tick("nightly", 1000.0, "job-1")
    store.record_tick("nightly", 900.0, "job-0")  # an older tick never moves it back
    store.save_schedules([Schedule("nightly", "report", "0 4 * * *", "UTC", "reports", None, catch_up=False)])
    got = {s.name: s for s in store.schedules()}
    n = got["nightly"]
    assert (n.cron, n.timezone, n.queue, n.payload, n.catch_up, n.enabled) == (
        "0 4 * * *",
        "UTC",
        "reports",
        None,
        False,
        False,
    )
    assert (n.last_tick_at.timestamp(), n.last_job_id) == (1000.0, "job-1")
    assert got["often"].enabled is True and got["often"].last_tick_at is None
    with pytest.raises(ScheduleNotFound):
        store.set_schedule_enabled("nope", True)
