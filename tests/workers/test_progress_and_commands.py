"""A handler's progress reaches the store while it runs (thread and process
pools), and an operator's quiet and stop commands reach a running worker
through the registry, on every store."""

from __future__ import annotations

import pytest

from tests.backends import StoreHandle
from tests.workers.procs import job_is, wait_until
from tests.workers.test_worker_inprocess import make_worker, running
from workers.handlers import JobContext
from workers.progress import MIN_INTERVAL_S, ProgressReporter


@pytest.mark.slow
@pytest.mark.parametrize("pool", ["thread", "process"])
def test_progress_moves_while_the_job_runs(handle: StoreHandle, pool: str) -> None:
    store = handle.store
    job = store.enqueue("stepwise", {"steps": 4, "step_s": 1.1})
    seen: set[float] = set()
    with running(make_worker(handle, pool=pool, concurrency=1)):

        def moved() -> bool:
            current = store.get(job.id)
            if current.progress:
                seen.add(current.progress["fraction"])
            return current.status.name == "Completed"

        wait_until(moved, timeout=60, what="the job to complete")
    final = store.get(job.id).progress
    assert (final["fraction"], final["message"]) == (1.0, "step 4 of 4")
    assert len(seen) >= 2, seen  # seen moving, not only at the end


def test_reports_are_throttled_per_job(handle: StoreHandle) -> None:
    store = handle.store
    job = store.enqueue("t")
    [c] = store.claim("w", ["default"], 1)
    reporter = ProgressReporter(store)
    ctx = JobContext.for_job(c, "w", reporter)
    ctx.progress(0.1)
    ctx.progress(0.2)  # within MIN_INTERVAL_S: dropped
    assert store.get(job.id).progress["fraction"] == 0.1
    ctx.progress(1.0)  # the last one always goes
    assert store.get(job.id).progress["fraction"] == 1.0
    assert MIN_INTERVAL_S >= 0.5


def test_a_stale_holders_progress_is_refused_quietly(handle: StoreHandle) -> None:
    store = handle.store
    job = store.enqueue("t")
    [c] = store.claim("w", ["default"], 1)
    store.cancel(job.id, actor="operator:ann")
    assert ProgressReporter(store).report(job.id, c.lease_token, "w", 0.5, None) is False
    assert store.get(job.id).progress is None


@pytest.mark.slow
def test_a_quiet_worker_claims_nothing_more_and_stop_stops_it(handle: StoreHandle) -> None:
    store = handle.store
    worker = make_worker(handle, concurrency=1, name="w-quiet")
    first = store.enqueue("noop")
    with running(worker):
        wait_until(lambda: job_is(store, first.id, "Completed"), timeout=30, what="the first job")
        store.command_worker("w-quiet", "quiet", actor="operator:ann")
        wait_until(lambda: worker._quiet.is_set(), timeout=30, what="the worker to go quiet")
        later = store.enqueue("noop")
        # Two heartbeats later the job is still waiting: a quiet worker claims nothing.
        beats = worker.heartbeat.interval_s() * 2 if worker.heartbeat else 1.0
        with pytest.raises(AssertionError):
            wait_until(lambda: not job_is(store, later.id, "Queued"), timeout=beats + 0.5, what="a claim")
        store.command_worker("w-quiet", "stop", actor="operator:ann")
        wait_until(lambda: worker._stopping.is_set(), timeout=30, what="the worker to stop")
    assert store.get(later.id).status.name == "Queued"
