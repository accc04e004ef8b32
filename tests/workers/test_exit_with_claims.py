"""A worker never exits 0 while a job it claimed is InProgress under its lease.

The orders of events that lost an ack (docs/architecture.md, "Shutdown"),
forced with real store calls held at the point where the threads raced:

* a claim of the wake-up thread (``claim_notified``, Redis keeps wake-up
  entries of jobs enqueued before any worker listened) that returned after
  the acker had stopped: the job ran, its completion was queued on a stopped
  acker and never written;
* a completion handed to the acker after it stopped (a run that went DONE
  while the shutdown passed its grace loop).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from store.errors import StoreUnavailable
from store.lifecycle import JobStatus
from tests.backends import StoreHandle
from tests.workers.procs import events, wait_until
from tests.workers.test_worker_inprocess import make_worker
from workers.acker import Acker
from workers.exits import EXIT_UNRECORDED
from workers.inflight import Running
from workers.worker import Worker

BOUND_S = 10.0


def hold_notified_claim_until_acker_stopped(
    worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> threading.Event:
    """Make the wake-up thread's claim win the job, then hold its return until
    the worker's acker has stopped (the shutdown's point of no return);
    the claim loop's first claim waits for the notified one. Returns the
    event set once the notified claim leased its job."""
    store = worker.store
    notified = threading.Event()
    acker_stopped = threading.Event()
    real_notified, real_claim, real_stop = store.claim_notified, store.claim, worker.acker.stop

    def claim_notified(*args: Any, **kwargs: Any) -> Any:
        jobs = real_notified(*args, **kwargs)
        if jobs:
            notified.set()
            acker_stopped.wait(BOUND_S)
        return jobs

    def claim(*args: Any, **kwargs: Any) -> Any:
        if worker.listener is not None:
            notified.wait(BOUND_S)
        return real_claim(*args, **kwargs)

    def stop(*args: Any, **kwargs: Any) -> None:
        real_stop(*args, **kwargs)
        acker_stopped.set()

    monkeypatch.setattr(store, "claim_notified", claim_notified)
    monkeypatch.setattr(store, "claim", claim)
    monkeypatch.setattr(worker.acker, "stop", stop)
    return notified


def test_a_burst_worker_runs_and_records_a_job_its_wake_up_thread_raced_for(
    handle: StoreHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = handle.store
    job = store.enqueue("noop")  # before any worker listens: Redis keeps its wake-up entry
    worker = make_worker(handle, burst=True, concurrency=1)
    hold_notified_claim_until_acker_stopped(worker, monkeypatch)

    assert worker.run() == 0
    done = store.get(job.id)
    assert done.status is JobStatus.Completed, (done, events(store, job.id))
    assert len(events(store, job.id, "completed")) == 1


def test_a_stopping_worker_releases_a_job_its_wake_up_thread_leased_too_late(
    handle: StoreHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    if handle.backend == "sqlite":
        pytest.skip("SQLite has no wake-up channel: the claim loop alone claims")
    store = handle.store
    job = store.enqueue("noop")
    worker = make_worker(handle, concurrency=1)
    notified = hold_notified_claim_until_acker_stopped(worker, monkeypatch)
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run()), daemon=True)
    thread.start()
    try:
        if not notified.wait(BOUND_S):
            # PostgreSQL's LISTEN starts after the enqueue's NOTIFY: no notice to race for.
            pytest.skip("the store sent no notice for a job enqueued before the worker listened")
    finally:
        worker.stop()
        thread.join(60)
    assert codes == [0]
    back = store.get(job.id)  # released at once, no attempt spent; never left InProgress
    assert (back.status, back.retry_count, back.worker_id) in (
        (JobStatus.Scheduled, 0, None),
        (JobStatus.Queued, 0, None),
    ), (back, events(store, job.id))
    assert [e.kind for e in events(store, job.id, "released")] == ["released"]


def test_a_completion_handed_to_a_stopped_acker_is_still_recorded(handle: StoreHandle) -> None:
    store = handle.store
    job = store.enqueue("noop")
    [claimed] = store.claim("w-late", ["default"], 1, 30.0)
    acker = Acker(store, "w-late")
    acker.start()
    acker.stop()
    assert not acker.is_alive()
    finished = threading.Event()
    run = Running(claimed, None)  # type: ignore[arg-type]  # the acker reads the job alone
    acker.submit(run, {"late": True}, finished.set)
    assert wait_until(finished.is_set, BOUND_S, "the late completion recorded")
    done = store.get(job.id)
    assert (done.status, done.result) == (JobStatus.Completed, {"late": True})


def test_a_burst_worker_whose_ack_is_never_written_exits_non_zero_naming_the_job(
    handle: StoreHandle, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The store answers the claim, then refuses every ack write (an outage
    that outlasts the acker's retries): the job stays InProgress under the
    worker's token, so the worker exits with EXIT_UNRECORDED and names it."""
    store = handle.store
    job = store.enqueue("noop")
    worker = make_worker(handle, burst=True, concurrency=1)

    def out(*_args: Any, **_kwargs: Any) -> Any:
        raise StoreUnavailable("the store went away (injected)")

    monkeypatch.setattr(store, "complete_many", out)
    monkeypatch.setattr(store, "complete_and_claim", out)
    monkeypatch.setattr(store, "complete", out)

    assert worker.run() == EXIT_UNRECORDED
    assert store.get(job.id).status is JobStatus.InProgress
    assert any(job.id in r.getMessage() and r.levelname == "ERROR" for r in caplog.records)
