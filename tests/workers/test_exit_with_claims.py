"""A worker never exits 0 while a job it claimed is InProgress under its lease.

The orders of events that lost an ack (docs/architecture.md, "Shutdown"),
forced with real store calls held at the point where the threads raced:

* a claim of the wake-up thread (``claim_notified``, Redis keeps wake-up
  entries of jobs enqueued before any worker listened) that returned after
  the shutdown had recorded its last acks: the job ran and its completion
  was never written (a burst worker now runs no wake-up thread, and only the
  main thread starts jobs);
* a notice (a job handed over to the worker) posted as the inbox closed;
* a completion posted after the inbox closed (recorded by the slot's thread);
* an ack the store never answered (the exit code names the job).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from store.errors import StoreUnavailable
from store.lifecycle import JobStatus
from store.notices import Notice
from tests.backends import StoreHandle
from tests.workers.procs import events, job_is, wait_until
from tests.workers.test_worker_inprocess import make_worker
from workers.execute import Outcome
from workers.exits import EXIT_UNRECORDED
from workers.handlers import JobContext
from workers.inbox import Inbox
from workers.inflight import InFlight, Running
from workers.outcomes import Outcomes
from workers.recorder import Recorder
from workers.worker import Worker

BOUND_S = 10.0


def hold_notified_claim_until_shutdown(worker: Worker, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make a wake-up thread's claim win the job, then hold its return until
    the shutdown wrote its pending progress reports (after its last acks);
    the claim loop's first claim waits for the notified one meanwhile."""
    store = worker.store
    notified = threading.Event()
    closed = threading.Event()
    real_notified, real_claim, real_close = store.claim_notified, store.claim, worker.progress.close

    def claim_notified(*args: Any, **kwargs: Any) -> Any:
        jobs = real_notified(*args, **kwargs)
        if jobs:
            notified.set()
            closed.wait(BOUND_S)
        return jobs

    def claim(*args: Any, **kwargs: Any) -> Any:
        if worker.listener is not None:
            notified.wait(BOUND_S)
        return real_claim(*args, **kwargs)

    def close() -> None:
        real_close()
        closed.set()

    monkeypatch.setattr(store, "claim_notified", claim_notified)
    monkeypatch.setattr(store, "claim", claim)
    monkeypatch.setattr(worker.progress, "close", close)


def test_a_burst_worker_runs_and_records_a_job_its_wake_up_thread_raced_for(
    handle: StoreHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = handle.store
    job = store.enqueue("noop")  # before any worker listens: Redis keeps its wake-up entry
    worker = make_worker(handle, burst=True, concurrency=1)
    hold_notified_claim_until_shutdown(worker, monkeypatch)

    assert worker.run() == 0
    done = store.get(job.id)
    assert done.status is JobStatus.Completed, (done, events(store, job.id))
    assert len(events(store, job.id, "completed")) == 1


def test_a_job_handed_over_as_the_worker_stops_is_given_back(
    handle: StoreHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wake-up thread's notice arrives as the main thread closes its inbox:
    the notice is refused and the job it carried (Redis hands a job over to
    an idle worker, leased) is given back at once, no attempt spent."""
    if not handle.backend.startswith("redis"):
        pytest.skip("only Redis hands a job over (leased) in a notice")
    store = handle.store
    worker = make_worker(handle, concurrency=1)
    held, closed = threading.Event(), threading.Event()
    real_notice, real_close = worker.inbox.notice, worker.inbox.close

    def notice(posted: Notice) -> bool:
        if posted.leased:
            held.set()
            closed.wait(BOUND_S)
        return real_notice(posted)

    def close() -> Any:
        left = real_close()
        closed.set()
        return left

    monkeypatch.setattr(worker.inbox, "notice", notice)
    monkeypatch.setattr(worker.inbox, "close", close)
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run()), daemon=True)
    thread.start()
    try:
        for _ in range(20):  # until an enqueue reaches the listening worker (not its claim loop)
            job = store.enqueue("noop")
            wait_until(lambda j=job.id: held.is_set() or job_is(store, j, "Completed"), BOUND_S)
            if held.is_set():
                break
        assert held.is_set(), "no notice reached the wake-up thread"
    finally:
        worker.stop()
        thread.join(60)
    assert codes == [0]
    back = store.get(job.id)
    assert back.status is not JobStatus.InProgress, (back, events(store, job.id))
    assert back.retry_count == 0 and not store.attempts(job.id)
    assert back.status in (JobStatus.Queued, JobStatus.Scheduled) and back.worker_id is None
    assert [e.kind for e in events(store, job.id, "released")] == ["released"]


def test_a_completion_posted_after_the_inbox_closed_is_recorded_by_its_slot(handle: StoreHandle) -> None:
    store = handle.store
    job = store.enqueue("noop")
    [claimed] = store.claim("w-late", ["default"], 1, 30.0)
    inflight, inbox = InFlight(), Inbox(10)
    recorder = Recorder(store, "w-late", inflight)
    outcomes = Outcomes(store, "w-late", inflight, inbox, recorder)
    inbox.close()
    run = Running(claimed, JobContext.for_job(claimed, "w-late"))
    inflight.add(run)
    outcomes.done(run, Outcome(result={"late": True}))
    done = store.get(job.id)
    assert (done.status, done.result) == (JobStatus.Completed, {"late": True})
    assert len(inflight) == 0


def test_a_burst_worker_whose_ack_is_never_written_exits_non_zero_naming_the_job(
    handle: StoreHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store answers the claim, then refuses every ack write (an outage
    that outlasts the recorder's retries): the job stays InProgress under the
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
    assert worker.unrecorded == [job.id]  # the jobs its last ERROR line names
    assert store.get(job.id).status is JobStatus.InProgress
