"""Worker hazards, each made to happen on purpose: a timeout the store did not
take, an ack flush held past the lease during shutdown, a cancel landing
between a process-pool schedule and its bookkeeping, a signal landing between
a supervisor's Popen and its bookkeeping. Faults are injected by wrapping the
store or the one call at the edge of the window; waits are bounded."""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Callable
from typing import Any

import pytest

from store.base import JobStore
from store.errors import StoreUnavailable
from store.recovery_run import run_recovery
from tests.backends import StoreHandle
from tests.workers.procs import events, wait_until
from tests.workers.test_worker_inprocess import make_worker, running
from workers import supervisor as supervisor_module
from workers.config import WorkerConfig
from workers.execute import Outcome
from workers.exits import EXIT_UNRECORDED
from workers.handlers import JobContext, get_handler, load_handlers
from workers.inflight import Running, State
from workers.pool import ProcessRunner
from workers.supervisor import Supervisor
from workers.worker import Worker

load_handlers(["tests.handlers"])

#: Bound on any wait for a worker, a pool process or a child (a loaded two-core machine).
WAIT_S = 30.0


class WrappedStore:
    """``store`` with some methods replaced; everything else passes through."""

    def __init__(self, store: JobStore, **overrides: Callable[..., Any]) -> None:
        self._store = store
        self._overrides = overrides

    def __getattr__(self, name: str) -> Any:
        if name in self._overrides:
            return self._overrides[name]
        return getattr(self._store, name)


# ------------------------------------------------- 1. a timeout the store never took
def test_late_result_after_an_unrecorded_timeout_is_not_acked(handle: StoreHandle) -> None:
    """The JobTimeout write gives up on an outage, so the job is still
    InProgress with the run's token (a 10 s lease): the handler's late result
    must not complete it. The lease is left to expire (recovery retries it),
    and the worker's exit says so (EXIT_UNRECORDED, naming the job)."""
    store = handle.store
    attempts: list[str] = []

    def fail_unavailable(job_id: str, token: int, error: dict[str, Any], **kwargs: Any) -> Any:
        attempts.append(error["type"])
        raise StoreUnavailable("injected outage for the JobTimeout write")

    job = store.enqueue("sleep", {"seconds": 3.0}, timeout_s=0.2, max_retries=0)
    config = make_worker(handle, concurrency=1).config.with_(lease_ttl_s=10.0)
    worker = Worker(config, WrappedStore(store, fail=fail_unavailable), install_signals=False)  # type: ignore[arg-type]
    with running(worker, EXIT_UNRECORDED):
        # The run timed out, its JobTimeout write gave up, the handler returned
        # and its outcome was dealt with: the run left the worker's hands.
        wait_until(
            lambda: attempts and len(worker.inflight) == 0 and worker.runner.busy() == 0,
            timeout=WAIT_S,
            what="the late result handled",
        )
        after = store.get(job.id)
    assert set(attempts) == {"JobTimeout"} and len(attempts) == 4  # one try and three retries
    assert (after.status.name, after.lease_token) == ("InProgress", job.lease_token + 1)
    assert not events(store, job.id, "completed")


# --------------------------------------- 2. an ack flush held past the lease at shutdown
def test_shutdown_keeps_renewing_leases_until_the_acks_are_flushed(handle: StoreHandle) -> None:
    store = handle.store
    flushing, go_on = threading.Event(), threading.Event()

    def held(ack: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            flushing.set()
            go_on.wait(WAIT_S)
            return ack(*args, **kwargs)

        return call

    job = store.enqueue("noop")
    config = make_worker(handle, concurrency=1).config
    # the acks go through complete_many, or with the next claim on a store that fetches_next
    wrapped = WrappedStore(
        store, complete_many=held(store.complete_many), complete_and_claim=held(store.complete_and_claim)
    )
    worker = Worker(config, wrapped, install_signals=False)  # type: ignore[arg-type]
    ttl = worker.config.lease_ttl_s
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert flushing.wait(WAIT_S), "the ack never reached the store"
        worker.stop()
        stopped_at = store.now()
        # Two lease TTLs on the store's clock: a lease nobody renews is expired by then.
        wait_until(lambda: store.now() >= stopped_at + 2 * ttl, timeout=WAIT_S, what="two lease TTLs")
        report = run_recovery(store, "tester", "operator:test", batch=10, lock_ttl_s=5)
        assert [r.job_id for r in report.recovered] == [], "the lease expired during the flush"
    finally:
        go_on.set()
        thread.join(WAIT_S)
    assert not thread.is_alive()
    done = store.get(job.id)
    assert done.status.name == "Completed" and done.lease_expirations == 0
    assert not events(store, job.id, "completion_refused")


# ------------------------------------ 3. a cancel between a process-pool schedule and its future
def process_runner() -> tuple[ProcessRunner, list[Outcome], threading.Event]:
    """A one-process runner whose ``done`` records outcomes and sets the event."""
    outcomes: list[Outcome] = []
    ended = threading.Event()

    def done(run: Running, outcome: Outcome) -> None:
        outcomes.append(outcome)
        ended.set()

    return ProcessRunner(1, ["tests.handlers"], done, lambda: None), outcomes, ended


def claimed_run(store: JobStore) -> Running:
    store.enqueue("sleep", {"seconds": 120})
    [job] = store.claim("w-test", ["default"], 1, lease_ttl_s=60)
    return Running(job, JobContext.for_job(job, "w-test"))


@pytest.mark.parametrize("handle", ["sqlite"], indirect=True)
def test_a_cancel_right_after_scheduling_kills_the_process_run(handle: StoreHandle) -> None:
    run = claimed_run(handle.store)
    runner, outcomes, ended = process_runner()
    schedule = runner._pool.schedule

    def schedule_then_cancel(*args: Any, **kwargs: Any) -> Any:
        future = schedule(*args, **kwargs)
        runner.cancel(run)  # the lease is lost just as the run is handed to the pool
        return future

    runner._pool.schedule = schedule_then_cancel  # type: ignore[method-assign]
    spec = get_handler("sleep")
    assert spec is not None
    try:
        runner.submit(run, spec)
        assert ended.wait(WAIT_S), "the cancelled run kept its process (it sleeps 120 s)"
        assert outcomes == [Outcome(dropped=True)] and runner.busy() == 0
    finally:
        runner.stop()


@pytest.mark.parametrize("handle", ["sqlite"], indirect=True)
def test_a_run_dropped_before_it_reaches_the_process_pool_is_not_scheduled(handle: StoreHandle) -> None:
    run = claimed_run(handle.store)
    assert run.move(State.DROPPED)  # its renewal was refused between claim and submit
    runner, outcomes, ended = process_runner()
    scheduled: list[object] = []
    schedule = runner._pool.schedule

    def recorded_schedule(*args: Any, **kwargs: Any) -> Any:
        scheduled.append(args)
        return schedule(*args, **kwargs)

    runner._pool.schedule = recorded_schedule  # type: ignore[method-assign]
    spec = get_handler("sleep")
    assert spec is not None
    try:
        runner.submit(run, spec)
        assert ended.wait(WAIT_S)
        assert (outcomes, scheduled, runner.busy()) == ([Outcome(dropped=True)], [], 0)
    finally:
        runner.stop()


# ------------------------------------ 4. a signal between a child's Popen and its slot
@pytest.mark.parametrize("handle", ["sqlite"], indirect=True)
def test_a_signal_right_after_popen_still_reaches_the_child(
    handle: StoreHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = WorkerConfig(
        store_url=handle.url,
        concurrency=1,
        lease_ttl_s=1.0,
        name="w-sup",
        handlers=("tests.handlers",),
        store=handle.store.settings,
    )
    sup = Supervisor(config, 1, install_signals=False)
    children: list[subprocess.Popen[bytes]] = []
    sent: list[int] = []
    real_popen = subprocess.Popen

    def popen_then_signal(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        proc = real_popen(*args, **kwargs)
        children.append(proc)
        send = proc.send_signal
        proc.send_signal = lambda signum: (sent.append(signum), send(signum))[1]  # type: ignore[method-assign]
        sup._on_signal(signal.SIGTERM, None)  # SIGTERM lands before the slot knows its child
        return proc

    monkeypatch.setattr(supervisor_module.subprocess, "Popen", popen_then_signal)
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(sup.run()), daemon=True)
    thread.start()
    try:
        thread.join(WAIT_S)
        assert not thread.is_alive(), "the supervisor waits for a child it never signalled"
        assert codes == [0] and len(children) == 1
        assert sent == [signal.SIGTERM]  # once: a second SIGTERM would make it exit at once
        assert children[0].poll() is not None
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait(WAIT_S)
        sup._wake.set()
