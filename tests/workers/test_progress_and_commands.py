"""A handler's progress reaches the store while it runs (thread and process
pools) and before its job completes, coalesced per run until a flush; an
operator's quiet, unquiet and stop commands reach a running worker through
the registry (a stop ends it with EXIT_STOPPED); on every store."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.errors import ValidationError
from store.lifecycle import EventKind
from store.models import JobSpec
from tests.backends import StoreHandle
from tests.workers.procs import job_is, registered, wait_until
from tests.workers.test_worker_inprocess import make_worker, running
from workers.exits import EXIT_STOPPED
from workers.handlers import JobContext
from workers.progress import ProgressReporter


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


@pytest.mark.parametrize("pool", ["thread", pytest.param("process", marks=pytest.mark.slow)])
def test_a_completed_job_holds_its_last_report(handle: StoreHandle, pool: str) -> None:
    store = handle.store
    jobs = store.enqueue_many([JobSpec("progress_hold") for _ in range(40)])
    assert make_worker(handle, burst=True, pool=pool, concurrency=4).run() == 0
    for job in jobs:
        done = store.get(job.id)
        assert done.status.name == "Completed", done
        assert (done.progress["fraction"], done.progress["message"]) == (0.9, "almost")
        assert not [e for e in store.events(job.id) if e.kind == EventKind.PROGRESS_REFUSED]


def test_a_long_jobs_progress_shows_before_it_completes(handle: StoreHandle, tmp_path: Path) -> None:
    store = handle.store
    release = tmp_path / "release"
    job = store.enqueue("progress_hold", {"path": str(release)})
    with running(make_worker(handle, concurrency=1)):
        shown = wait_until(
            lambda: job_is(store, job.id, "InProgress") and store.get(job.id).progress,
            timeout=30,
            what="the running job's progress",
        )
        assert (shown["fraction"], shown["message"]) == (0.5, "halfway")
        release.touch()
        done = wait_until(lambda: job_is(store, job.id, "Completed"), timeout=30, what="the job to complete")
    assert (done.progress["fraction"], done.progress["message"]) == (0.9, "almost")


def test_reports_are_coalesced_until_a_flush(handle: StoreHandle) -> None:
    store = handle.store
    job = store.enqueue("t")
    [c] = store.claim("w", ["default"], 1)
    reporter = ProgressReporter(store, flush_interval_s=3600)  # no periodic write in this test
    ctx = JobContext.for_job(c, "w", reporter)
    ctx.progress(0.1)
    ctx.progress(0.2, "two")  # replaces 0.1: only the latest report of a run is written
    with pytest.raises(ValidationError):
        ctx.progress(1.5)  # checked at once, never queued
    assert store.get(job.id).progress is None  # a report never waits for the store
    assert reporter.pending() == 1
    assert reporter.flush() == 1
    got = store.get(job.id).progress
    assert (got["fraction"], got["message"]) == (0.2, "two")
    assert reporter.flush() == 0 and reporter.pending() == 0
    ctx.progress(1.0)
    reporter.close()  # writes what is pending
    assert store.get(job.id).progress["fraction"] == 1.0


def test_a_stale_holders_progress_is_refused_quietly(handle: StoreHandle) -> None:
    store = handle.store
    job = store.enqueue("t")
    [c] = store.claim("w", ["default"], 1)
    store.cancel(job.id, actor="operator:ann")
    reporter = ProgressReporter(store, flush_interval_s=3600)
    reporter.report(job.id, c.lease_token, "w", 0.5, None)
    assert reporter.flush() == 0 and reporter.pending() == 0
    assert store.get(job.id).progress is None
    assert store.events(job.id)[-1].kind == EventKind.PROGRESS_REFUSED


@pytest.mark.slow
def test_a_quiet_worker_claims_nothing_more_until_unquiet_and_stop_ends_it(handle: StoreHandle) -> None:
    store = handle.store
    worker = make_worker(handle, concurrency=1, name="w-quiet")
    first = store.enqueue("noop")
    with running(worker, EXIT_STOPPED):  # its own code: a supervisor does not replace it
        wait_until(lambda: job_is(store, first.id, "Completed"), timeout=30, what="the first job")
        store.command_worker("w-quiet", "quiet", actor="operator:ann")
        wait_until(lambda: worker._quiet.is_set(), timeout=30, what="the worker to go quiet")
        later = store.enqueue("noop")
        # Two heartbeats later the job is still waiting: a quiet worker claims nothing.
        beats = worker.heartbeat.interval_s() * 2 if worker.heartbeat else 1.0
        with pytest.raises(AssertionError):
            wait_until(lambda: not job_is(store, later.id, "Queued"), timeout=beats + 0.5, what="a claim")
        store.command_worker("w-quiet", "unquiet", actor="operator:ann")
        done = wait_until(lambda: job_is(store, later.id, "Completed"), timeout=30, what="claims to resume")
        assert done.worker_id == "w-quiet" and not worker._quiet.is_set()
        store.command_worker("w-quiet", "stop", actor="operator:ann")
        wait_until(lambda: worker._stopping.is_set(), timeout=30, what="the worker to stop")
    assert not registered(store, "w-quiet")
