"""One Worker run inside the test process (thread pool, no signals) on every
backend: outcomes of each kind, cancellation through a refused heartbeat,
graceful stop, and the recovery service and ``run_recovery``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from typing import Any

import pytest

from store.base import RECOVERY_LOCK
from store.lifecycle import JobStatus
from store.recovery_run import RecoveryBusy, run_recovery
from tests.backends import StoreHandle
from tests.store.helpers import expire_leases
from tests.workers.procs import events, job_is, registered, wait_until
from workers.claim import IdleBackoff
from workers.config import WorkerConfig
from workers.handlers import load_handlers
from workers.services import RecoveryService
from workers.worker import Worker

load_handlers(["tests.handlers"])


def make_worker(handle: StoreHandle, **options: Any) -> Worker:
    config = WorkerConfig(
        store_url=handle.url,
        concurrency=options.pop("concurrency", 2),
        lease_ttl_s=options.pop("lease_ttl_s", 1.0),
        name=options.pop("name", "w-in"),
        handlers=("tests.handlers",),
        recovery_interval_s=0.2,
        recovery_lock_ttl_s=5.0,
        store=handle.store.settings,
        **options,
    )
    return Worker(config, handle.store, install_signals=False)


@contextmanager
def running(worker: Worker, code: int = 0) -> Iterator[Worker]:
    """Run ``worker`` in a thread; stop it and wait for it on the way out,
    expecting it to exit with ``code``."""
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run()), daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(60)
        assert not thread.is_alive() and codes == [code]


def test_every_kind_of_outcome(handle: StoreHandle) -> None:
    store = handle.store
    ok = store.enqueue("noop")
    unknown = store.enqueue("no-such-handler")
    not_json = store.enqueue("not_json")
    permanent = store.enqueue("permanent")
    boom = store.enqueue("boom", max_retries=5)

    # No grace: a job whose handler no worker has fails at once (tests/workers/test_handler_catalogue.py
    # gives it back within the grace).
    assert make_worker(handle, burst=True, unknown_handler_grace_s=0).run() == 0

    done = store.get(ok.id)
    assert done.status.name == "Completed" and done.result == {"worker": "w-in", "token": 1, "attempt": 0}
    for job, kind in (
        (unknown, "UnknownHandler"),
        (not_json, "ResultNotJSON"),
        (permanent, "PermanentError"),
    ):
        failed = store.get(job.id)
        assert (failed.status.name, failed.error["type"], failed.retry_count) == ("Failed", kind, 0)
    assert "no-such-handler" in store.get(unknown.id).error["message"]
    retried = store.get(boom.id)  # burst stops once nothing is due: the retry waits for its backoff
    assert retried.status.name in ("Scheduled", "Failed") and retried.retry_count >= 1
    assert retried.error["type"] == "ValueError" and "raise ValueError" in retried.error["traceback"]
    assert not registered(store, "w-in")


def test_canceled_running_job_is_told_to_stop_and_its_ack_refused(handle: StoreHandle) -> None:
    store = handle.store
    job = store.enqueue("wait_cancel", {"seconds": 60})
    with running(make_worker(handle)):
        wait_until(lambda: job_is(store, job.id, "InProgress"), what="job claimed")
        store.cancel(job.id, actor="operator:test")
        # the next heartbeat is refused: ctx.cancelled is set, the handler returns and
        # the run is dropped, never acked
        [refused] = wait_until(lambda: events(store, job.id, "heartbeat_refused"), what="the refused renewal")
        assert refused.actor == "w-in"
    assert store.get(job.id).status.name == "Canceled"
    assert not events(store, job.id, "completed")


def test_stop_lets_short_jobs_finish_and_releases_the_rest(handle: StoreHandle) -> None:
    store = handle.store
    short = store.enqueue("sleep", {"seconds": 0.3})
    long = store.enqueue("wait_cancel", {"seconds": 60})
    worker = make_worker(handle, grace_s=1.0)
    with running(worker):
        wait_until(lambda: job_is(store, short.id, "InProgress") and job_is(store, long.id, "InProgress"))
    assert store.get(short.id).status.name == "Completed"
    released = store.get(long.id)
    assert (released.status.name, released.retry_count, released.worker_id) == ("Scheduled", 0, None)
    assert [e.actor for e in events(store, long.id, "released")] == ["w-in"]
    assert not registered(store, "w-in")


def test_startup_drains_expired_leases_and_records_the_run(handle: StoreHandle) -> None:
    store = handle.store
    store.enqueue_many([("noop", {"i": i}) for i in range(5)])
    store.enqueue("noop", max_retries=0)
    while store.claim("w-dead", ["default"], 10, lease_ttl_s=1.0):
        pass
    expire_leases(store, 5)  # this store handle (the worker's) now sees them expired

    service = RecoveryService(store, "w-in", interval_s=60, batch=2, lock_ttl_s=5)
    report = service.drain()  # three batches of at most two
    assert report is not None and len(report.recovered) == 5 and len(report.failed) == 1
    assert store.expired_lease_count() == 0 and service.drain() is None  # nothing left: no run
    [run] = store.recovery_runs()
    assert (run.trigger, run.owner, run.recovered, run.failed) == ("startup", "w-in", 5, 1)
    assert store.lock_info(RECOVERY_LOCK).owner is None


def test_run_recovery_dry_run_and_a_busy_lock(handle: StoreHandle) -> None:
    store = handle.store
    job = store.enqueue("noop")
    [claimed] = store.claim("w-dead", ["default"], 1, lease_ttl_s=1.0)
    expire_leases(store, 5)

    preview = run_recovery(store, "op", "operator:ann", batch=10, lock_ttl_s=5, dry_run=True)
    assert preview.dry_run and [r.job_id for r in preview.recovered] == [job.id]
    assert store.get(job.id).lease_token == claimed.lease_token and store.recovery_runs() == []

    assert store.acquire_lock(RECOVERY_LOCK, "someone-else", 30)
    with pytest.raises(RecoveryBusy, match="someone-else"):
        run_recovery(store, "op", "operator:ann", batch=10, lock_ttl_s=5, wait_s=0.1)
    store.release_lock(RECOVERY_LOCK, "someone-else")

    report = run_recovery(store, "op", "operator:ann", batch=10, lock_ttl_s=5)
    assert [r.job_id for r in report.recovered] == [job.id] and not report.more
    [run] = store.recovery_runs()
    assert (run.trigger, run.owner, run.recovered) == ("operator:ann", "op", 1)


def test_jobs_claimed_ahead_wait_for_a_slot_and_are_given_back_at_stop(handle: StoreHandle) -> None:
    store = handle.store
    first = store.enqueue("noop")  # a short run first: the worker then claims ahead
    worker = make_worker(handle, concurrency=1, prefetch=8, grace_s=0.5)
    with running(worker):
        wait_until(lambda: job_is(store, first.id, "Completed"), what="the first job")
        hold = store.enqueue("wait_cancel", {"seconds": 60}, priority=1)
        ahead = store.enqueue_many([("noop", {"i": i}) for i in range(3)])
        # one slot, busy with `hold`: the noops are leased ahead and wait, not run
        wait_until(
            lambda: all(job_is(store, j.id, "InProgress") for j in (hold, *ahead)), what="claims ahead"
        )
        # the claim commits before the worker hands its jobs to the runner: wait for the hand-over
        wait_until(lambda: worker.runner.busy() == 4, what="one running, three waiting for the slot")
    for job in ahead:
        back = store.get(job.id)
        assert (back.status.name, back.retry_count, back.worker_id) == ("Scheduled", 0, None)
        assert [e.actor for e in events(store, job.id, "released")] == ["w-in"]
        assert not events(store, job.id, "completed")
    assert store.get(hold.id).status.name == "Scheduled"  # released after its grace


def test_an_idle_worker_is_woken_by_enqueue(handle: StoreHandle) -> None:
    """Stores with a wake-up channel: a job enqueued to an idle worker runs at
    once, long before the idle poll (made 30 s here) would find it."""
    store = handle.store
    if store.wakeups(["default"]) is None:
        pytest.skip(f"{handle.backend} has no wake-up channel (workers poll)")
    worker = make_worker(handle)
    worker.claims._idle = IdleBackoff(30.0, 30.0)
    with running(worker):
        wait_until(lambda: worker.listener is not None and registered(store, "w-in"), what="worker up")
        warm = store.enqueue("noop")  # the subscription may still be starting: wait for one run
        wait_until(lambda: job_is(store, warm.id, "Completed"), timeout=40, what="first job")
        job = store.enqueue("noop")
        wait_until(lambda: job_is(store, job.id, "Completed"), timeout=5, what="woken by the notice")


def test_a_full_worker_leaves_notices_to_an_idle_one(handle: StoreHandle, tmp_path) -> None:
    """Redis hands each notice to one waiting worker: a worker with no free
    slot must not take them (nor keep one it took as it filled up), or the
    jobs would wait for the idle worker's poll (made 30 s here). Leases of
    5 s: the held job must outlive a loaded machine's stalls (a 1-s lease
    expired in CI, and the busy worker then exited with its slot lost)."""
    store = handle.store
    if store.wakeups(["default"]) is None:
        pytest.skip(f"{handle.backend} has no wake-up channel (workers poll)")
    release = tmp_path / "release"
    busy = make_worker(handle, name="w-busy", concurrency=1, lease_ttl_s=5.0)
    idle = make_worker(handle, name="w-idle", lease_ttl_s=5.0)
    for worker in (busy, idle):
        worker.claims._idle = IdleBackoff(30.0, 30.0)
    held = store.enqueue("hold", {"path": str(release)})
    try:
        with running(busy):
            wait_until(
                lambda: job_is(store, held.id, "InProgress"), timeout=40, what="busy worker holds its job"
            )
            with running(idle):
                wait_until(
                    lambda: idle.listener is not None and registered(store, "w-idle"), what="idle worker up"
                )
                warm = store.enqueue("noop")
                wait_until(lambda: job_is(store, warm.id, "Completed"), timeout=40, what="first job")
                for _ in range(5):
                    job_id = store.enqueue("noop").id
                    wait_until(
                        lambda j=job_id: job_is(store, j, "Completed"), timeout=5, what="woken by the notice"
                    )
                    assert store.get(job_id).worker_id == "w-idle"
            release.touch()
    finally:
        release.touch()


def test_a_worker_that_loses_a_notified_job_claims_nothing_more(handle: StoreHandle, monkeypatch) -> None:
    """PostgreSQL sends every notice to every listener: of two idle workers,
    one leases the job a notice names and the other, finding it taken, runs
    no claim of its own (the notice announced that job alone; with N idle
    workers each enqueue would otherwise cost N - 1 claims). The winner
    claims once its run is done (more work?), as any worker does. Polls are
    made 30 s here, so every claim seen comes from a notice or a run's end."""
    store = handle.store
    if handle.backend != "postgresql":
        pytest.skip("Redis hands each notice to one worker; SQLite has no notices")
    workers = [make_worker(handle, name=f"w-{i}", lease_ttl_s=5.0) for i in range(2)]
    for worker in workers:
        worker.claims._idle = IdleBackoff(30.0, 30.0)
    claims: list[str] = []
    real_claim = store.claim

    def counted(worker_id: str, *args: Any, **kwargs: Any) -> list[Any]:
        claims.append(worker_id)
        return real_claim(worker_id, *args, **kwargs)

    with running(workers[0]), running(workers[1]):
        up = lambda: all(w.listener is not None and registered(store, w.id) for w in workers)  # noqa: E731
        wait_until(up, what="both workers up")
        warm = store.enqueue("noop")  # the subscriptions may still be starting: wait for one run
        wait_until(lambda: job_is(store, warm.id, "Completed"), timeout=40, what="first job")
        time.sleep(0.2)  # the warm run's own claims are over
        monkeypatch.setattr(store, "claim", counted)
        for _ in range(5):
            claims.clear()
            job_id = store.enqueue("noop").id
            wait_until(lambda j=job_id: job_is(store, j, "Completed"), timeout=5, what="woken by the notice")
            winner = store.get(job_id).worker_id
            wait_until(lambda w=winner: w in claims, timeout=5, what="the winner's claim after its run")
            assert set(claims) == {winner}


def test_acks_claim_the_next_jobs_where_the_store_does_it_in_one_call(handle: StoreHandle) -> None:
    """On a store that ``fetches_next`` the main thread's call that records a completion
    also leases the next job (its started_at is the ack's completed_at: one
    call, one clock reading) and carries the run's last progress report,
    every time: the claim loop does not claim for the slots of acks in hand,
    always; on the others the claim loop claims,
    as before. Either way every job runs once, holding its last report."""
    store = handle.store
    ids = [store.enqueue("progress_hold").id for _ in range(6)]
    assert make_worker(handle, concurrency=1, prefetch=0, burst=True).run() == 0
    jobs = sorted((store.get(job_id) for job_id in ids), key=lambda j: j.started_at)
    assert [(j.status, j.lease_token, j.progress["message"]) for j in jobs] == [
        (JobStatus.Completed, 1, "almost")
    ] * 6
    if store.fetches_next:  # each next job came in its previous job's ack (the claim loop leaves them)
        assert [b.started_at == a.completed_at for a, b in pairwise(jobs)] == [True] * 5
