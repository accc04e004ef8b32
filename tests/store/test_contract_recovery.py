"""Contract: recovery of expired leases, its preview, locks and run history."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from store.base import RECOVERY_LOCK, JobStore
from store.lifecycle import JobStatus
from store.models import RecoveryRun, WorkerInfo
from tests.store.helpers import expire_leases

S = JobStatus


def test_expired_lease_is_retried_with_backoff(store: JobStore) -> None:
    job = store.enqueue("t", max_retries=2)
    store.claim("w-dead", ["default"], 1, lease_ttl_s=5)
    assert store.recover_expired().recovered == []  # still live
    expire_leases(store, 6)
    assert store.expired_lease_count() == 1
    report = store.recover_expired(owner="rec-1")
    [r] = report.recovered
    assert (r.job_id, r.worker_id, r.token, r.outcome, r.retry_count) == (job.id, "w-dead", 1, S.Scheduled, 1)
    assert r.delay_s == store.settings.retry.delay_s(1)
    assert report.failed == [] and not report.dry_run and not report.more
    after = store.get(job.id)
    assert (after.status, after.retry_count, after.lease_expirations) == (S.Scheduled, 1, 1)
    assert after.error["type"] == "LeaseExpired" and "w-dead" in after.error["message"]
    wait = (after.retry_delay_until - after.last_updated_at).total_seconds()
    assert wait == pytest.approx(store.settings.retry.delay_s(1), abs=0.5)
    event = store.events(job.id)[-1]
    assert (event.kind, event.from_status, event.to_status, event.actor) == (
        "lease_expired",
        S.InProgress,
        S.Scheduled,
        "rec-1",
    )
    assert store.expired_lease_count() == 0
    assert store.recover_expired().recovered == []  # nothing twice


def test_expired_lease_fails_once_retries_are_spent(store: JobStore) -> None:
    job = store.enqueue("t", max_retries=0)
    store.claim("w", ["default"], 1, lease_ttl_s=5)
    expire_leases(store, 6)
    report = store.recover_expired()
    assert [r.job_id for r in report.failed] == [job.id] and report.recovered == []
    failed = store.get(job.id)
    assert (failed.status, failed.retry_count, failed.lease_expirations) == (S.Failed, 0, 1)
    assert store.counts().by_status["Failed"] == 1


def test_preview_changes_nothing(store: JobStore) -> None:
    jobs = [store.enqueue("t", max_retries=m) for m in (0, 3)]
    store.claim("w", ["default"], 2, lease_ttl_s=5)
    expire_leases(store, 6)
    before = [store.get(j.id) for j in jobs]
    preview = store.preview_recovery()
    assert preview.dry_run
    assert [r.job_id for r in preview.failed] == [jobs[0].id]
    assert [r.job_id for r in preview.recovered] == [jobs[1].id]
    assert [store.get(j.id) for j in jobs] == before
    report = store.recover_expired()
    assert [r.job_id for r in report.failed] == [jobs[0].id]
    assert [r.job_id for r in report.recovered] == [jobs[1].id]


def test_recovery_is_bounded_and_leaves_live_leases(store: JobStore) -> None:
    store.enqueue_many([("t", {"i": i}) for i in range(30)])
    store.claim("w-dead", ["default"], 30, lease_ttl_s=5)
    store.enqueue("live")
    expire_leases(store, 6)
    [live] = store.claim("w-live", ["default"], 1, lease_ttl_s=60)
    first = store.recover_expired(limit=20)
    assert len(first.recovered) == 20 and first.more
    second = store.recover_expired(limit=20)
    assert len(second.recovered) == 10 and not second.more
    assert store.get(live.id).status is S.InProgress
    assert store.get(live.id).lease_expires_at == live.lease_expires_at


def test_lock_is_exclusive_until_released_or_expired(store: JobStore) -> None:
    assert store.lock_info(RECOVERY_LOCK).owner is None
    assert store.acquire_lock(RECOVERY_LOCK, "a", 10)
    assert not store.acquire_lock(RECOVERY_LOCK, "b", 10)
    assert store.acquire_lock(RECOVERY_LOCK, "a", 10)  # extend
    assert store.lock_info(RECOVERY_LOCK).owner == "a"
    assert not store.release_lock(RECOVERY_LOCK, "b")
    assert store.release_lock(RECOVERY_LOCK, "a")
    assert store.acquire_lock(RECOVERY_LOCK, "b", 10)
    store.clock_offset_s += 11
    assert store.lock_info(RECOVERY_LOCK).owner is None
    assert store.acquire_lock(RECOVERY_LOCK, "c", 10)
    assert store.lock_info(RECOVERY_LOCK).owner == "c"


def test_recovery_runs_are_recorded(store: JobStore) -> None:
    t = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    for i in range(3):
        run = RecoveryRun(
            str(uuid.uuid4()), t.replace(minute=i), t.replace(minute=i), "rec", "interval", i, 0, 1.5
        )
        store.record_recovery_run(run)
    runs = store.recovery_runs(limit=2)
    assert [r.recovered for r in runs] == [2, 1]
    assert runs[0].started_at == t.replace(minute=2) and runs[0].trigger == "interval"


def test_worker_registry(store: JobStore) -> None:
    info = WorkerInfo("w-1", "host", 123, ["a", "b"], 4, ["j1"], datetime(2026, 1, 1, tzinfo=UTC))
    store.worker_heartbeat(info)
    info.jobs_in_hand = ["j1", "j2"]
    store.worker_heartbeat(info)
    store.worker_heartbeat(WorkerInfo("w-2", "host", 124, ["a"], 1))
    workers = {w.id: w for w in store.workers()}
    assert set(workers) == {"w-1", "w-2"}
    assert workers["w-1"].jobs_in_hand == ["j1", "j2"] and workers["w-1"].queues == ["a", "b"]
    assert workers["w-1"].last_seen_at is not None
    store.remove_worker("w-1")
    assert [w.id for w in store.workers()] == ["w-2"]
    store.worker_heartbeat(WorkerInfo("w-2", "other-host", 999, ["a"], 1))  # restarted under the same id
    [again] = store.workers()
    assert (again.host, again.pid) == ("other-host", 999)
