"""Maintenance over the contract, on every store:
retention by status in bounded batches under a lock, dead workers pruned,
each run recorded. Time moves with the store's clock, never by sleeping."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from store.base import JobStore
from store.errors import JobNotFound
from store.lifecycle import JobStatus
from store.maintenance import (
    RETENTION_LOCK,
    WORKERS_LOCK,
    MaintenanceBusy,
    RunLock,
    run_owner,
    run_retention,
    run_worker_pruning,
)
from store.models import WorkerInfo
from tests.store.helpers import job_in
from workers.services import MaintenanceService

S = JobStatus
DAY = 86400.0
RETENTION = {S.Completed: 7 * DAY, S.Failed: 30 * DAY, S.Canceled: 0.0}


def completed_jobs(store: JobStore, n: int) -> list[str]:
    """``n`` Completed jobs, made in batches."""
    store.enqueue_many([("t", {"i": i}, "bulk") for i in range(n)])
    claimed = store.claim("w-setup", ["bulk"], limit=n)
    store.complete_many([(j.id, j.lease_token, None) for j in claimed], return_jobs=False)
    return [j.id for j in claimed]


def remaining(store: JobStore, status: JobStatus) -> int:
    return store.counts().by_status.get(status.name, 0)


def test_retention_prunes_each_status_after_its_own_time(store: JobStore) -> None:
    for status in (S.Completed, S.Failed, S.Canceled):
        job_in(store, status)
    store.clock_offset_s += 8 * DAY  # Completed is past 7 days, Failed not past 30
    job_in(store, S.Completed)  # a young one stays
    run = run_retention(store, RETENTION, "me")
    assert run is not None and (run.task, run.count, run.owner) == ("retention", 1, "me")
    assert (remaining(store, S.Completed), remaining(store, S.Failed), remaining(store, S.Canceled)) == (
        1,
        1,
        1,
    )
    store.clock_offset_s += 30 * DAY
    assert run_retention(store, RETENTION, "me").count == 2  # type: ignore[union-attr]
    assert remaining(store, S.Canceled) == 1  # 0 keeps forever
    assert [r.count for r in store.maintenance_runs("retention")] == [2, 1]


def test_retention_works_in_bounded_batches_and_records_the_longest(store: JobStore) -> None:
    ids = completed_jobs(store, 300)
    store.clock_offset_s += 8 * DAY
    run = run_retention(store, RETENTION, "me", batch=40)
    assert run is not None and run.count == 300
    assert 0 < run.longest_batch_ms <= run.duration_ms
    assert remaining(store, S.Completed) == 0
    assert store.lock_info(RETENTION_LOCK).owner is None  # released
    [recorded] = store.maintenance_runs("retention")
    assert (recorded.id, recorded.count) == (run.id, 300)
    with pytest.raises(JobNotFound):  # gone with its events
        store.get(ids[0])


def test_retention_is_one_instance_at_a_time(store: JobStore) -> None:
    assert store.acquire_lock(RETENTION_LOCK, "other", 30)
    with pytest.raises(MaintenanceBusy) as exc:
        run_retention(store, RETENTION, "me")
    assert exc.value.holder == "other"
    assert store.maintenance_runs("retention") == []


def test_each_run_owns_its_lock_even_for_one_owner(store: JobStore) -> None:
    # A run by "me" holds the lock (as its own owner); a second run by "me" is refused
    # and frees nothing, where sharing the owner would have let it in and released it.
    with RunLock(store, RETENTION_LOCK, "retention", "me", 30) as held:
        assert held.owner.startswith("me#") and store.lock_info(RETENTION_LOCK).owner == held.owner
        with pytest.raises(MaintenanceBusy) as exc:
            run_retention(store, RETENTION, "me")
        assert exc.value.holder == held.owner
        RunLock(store, RETENTION_LOCK, "retention", "me", 30).release()  # not its lock: nothing happens
        assert store.lock_info(RETENTION_LOCK).owner == held.owner
        assert held.extend()
    assert store.lock_info(RETENTION_LOCK).owner is None
    assert store.acquire_lock(RETENTION_LOCK, "me", 30)  # a lock held under the bare name (an older run)
    with pytest.raises(MaintenanceBusy):
        run_retention(store, RETENTION, "me")
    assert store.lock_info(RETENTION_LOCK).owner == "me"  # and it is not freed by the refused run
    assert len(run_owner("x" * 300)) == 200 and run_owner("a") != run_owner("a")


def test_a_run_that_lost_its_lock_cannot_extend_or_free_the_new_holders(store: JobStore) -> None:
    lock = RunLock(store, RETENTION_LOCK, "retention", "me", 5).acquire()
    store.clock_offset_s += 6  # it expired mid-run
    assert store.acquire_lock(RETENTION_LOCK, "other", 30)
    assert not lock.extend()
    lock.release()
    assert store.lock_info(RETENTION_LOCK).owner == "other"


def test_retention_keeps_its_lock_across_batches(store: JobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    completed_jobs(store, 100)
    store.clock_offset_s += 8 * DAY
    holders: list[str | None] = []
    real_purge = store.purge

    def slow_purge(*args: object, **kwargs: object) -> int:
        holders.append(store.lock_info(RETENTION_LOCK).owner)
        n = real_purge(*args, **kwargs)  # type: ignore[arg-type]
        store.clock_offset_s += 4  # each batch takes most of the lock's TTL
        return n

    monkeypatch.setattr(store, "purge", slow_purge)
    run = run_retention(store, RETENTION, "me", batch=25, lock_ttl_s=5)
    assert run is not None and run.count == 100 and run.owner == "me"
    assert len(holders) >= 4 and None not in holders and len(set(holders)) == 1


def test_a_recent_run_is_not_repeated(store: JobStore) -> None:
    assert run_retention(store, RETENTION, "a") is not None
    assert run_retention(store, RETENTION, "b", skip_if_ran_within_s=30) is None
    store.clock_offset_s += 31
    assert run_retention(store, RETENTION, "b", skip_if_ran_within_s=30) is not None
    assert [r.owner for r in store.maintenance_runs("retention")] == ["b", "a"]


def test_retention_refuses_an_unfinished_status(store: JobStore) -> None:
    with pytest.raises(ValueError, match="finished"):
        run_retention(store, {S.Queued: 1.0}, "me")


def _worker(worker_id: str) -> WorkerInfo:
    now = datetime.now(UTC)
    return WorkerInfo(id=worker_id, host="h", pid=1, queues=["default"], concurrency=1, started_at=now)


def test_dead_workers_are_pruned_with_a_log_line_each(
    store: JobStore, caplog: pytest.LogCaptureFixture
) -> None:
    store.worker_heartbeat(_worker("old"))
    store.clock_offset_s += 400
    store.worker_heartbeat(_worker("alive"))
    with caplog.at_level(logging.INFO, logger="store.maintenance"):
        removed = run_worker_pruning(store, 300, "me")
    assert removed == ["old"]
    assert [w.id for w in store.workers()] == ["alive"]
    assert [m for m in caplog.messages if "forgotten" in m] == [
        "worker old forgotten: no heartbeat for more than 300s (by me)"
    ]
    [run] = store.maintenance_runs("workers")
    assert (run.count, run.owner) == (1, "me")
    assert store.lock_info(WORKERS_LOCK).owner is None
    assert store.acquire_lock(WORKERS_LOCK, "other", 30)
    with pytest.raises(MaintenanceBusy):
        run_worker_pruning(store, 300, "me")


def test_the_service_runs_both_tasks_and_skips_when_another_just_did(store: JobStore) -> None:
    job_in(store, S.Completed)
    store.worker_heartbeat(_worker("old"))
    store.clock_offset_s += 8 * DAY
    first = MaintenanceService(store, "w1", 60.0, RETENTION, 300.0)
    second = MaintenanceService(store, "w2", 60.0, RETENTION, 300.0)
    first.tick()
    second.tick()  # within half an interval of w1's runs: skipped
    assert [(r.owner, r.count) for r in store.maintenance_runs("retention")] == [("w1", 1)]
    assert [(r.owner, r.count) for r in store.maintenance_runs("workers")] == [("w1", 1)]
    store.clock_offset_s += 31
    second.tick()
    assert [r.owner for r in store.maintenance_runs("retention")] == ["w2", "w1"]
