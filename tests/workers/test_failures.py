"""Jobs that misbehave: poison jobs that kill their process, execution timeouts
in both pools, and a worker whose every slot is stuck."""

from __future__ import annotations

import signal

from store.models import JobSpec
from tests.backends import StoreHandle
from tests.workers.procs import Spawner, events, job_is, registered, wait_until

EXIT_SLOTS_LOST = 3  # workers.worker.EXIT_SLOTS_LOST


def all_completed(handle: StoreHandle, ids: list[str]) -> bool:
    return all(handle.store.get(i).status.name == "Completed" for i in ids)


def test_process_pool_kills_poison_and_overdue_jobs_while_others_flow(
    handle: StoreHandle, spawn: Spawner
) -> None:
    store = handle.store
    worker = spawn.worker("--pool", "process", "--concurrency", "2", name="w-proc")
    poison = store.enqueue("crash", None, max_retries=1)  # os._exit(1) in the job's process
    slow = store.enqueue("sleep", {"seconds": 120}, timeout_s=0.5, max_retries=1)
    others = [j.id for j in store.enqueue_many([JobSpec("noop", {"i": i}) for i in range(10)])]

    failed = wait_until(lambda: job_is(store, poison.id, "Failed"), timeout=120, what="poison job failed")
    assert failed.error["type"] == "ProcessExited"
    assert (failed.retry_count, failed.lease_expirations) == (1, 0)
    assert len(events(store, poison.id, "claimed")) == 2  # max_retries=1: two attempts

    timed_out = wait_until(lambda: job_is(store, slow.id, "Failed"), timeout=120, what="slow job failed")
    assert timed_out.error["type"] == "JobTimeout"
    assert timed_out.retry_count == 1  # retried once through the retry policy, then failed
    assert not events(store, slow.id, "completion_refused")  # its process was killed: no late ack

    wait_until(lambda: all_completed(handle, others), what="the other jobs completed")
    assert worker.alive()  # only the jobs' processes died


def test_poison_job_killing_a_thread_worker_is_failed_and_the_worker_replaced(
    handle: StoreHandle, spawn: Spawner
) -> None:
    store = handle.store
    supervisor = spawn.worker("--processes", "2", "--concurrency", "2", name="sup")
    poison = store.enqueue("crash", None, max_retries=1)
    others = [j.id for j in store.enqueue_many([JobSpec("noop", {"i": i}) for i in range(20)])]

    failed = wait_until(lambda: job_is(store, poison.id, "Failed"), timeout=120, what="poison job failed")
    assert failed.error["type"] == "LeaseExpired"  # its worker died with it, twice
    assert (failed.retry_count, failed.lease_expirations) == (1, 2)
    wait_until(lambda: all_completed(handle, others), timeout=120, what="the other jobs completed")
    assert supervisor.alive()
    restarted = wait_until(
        lambda: [w.id for w in store.workers() if w.id.count(".") == 2], what="a restarted worker registered"
    )
    assert all(name.startswith("sup.") for name in restarted)

    now = store.now()
    serving = {w.id for w in store.workers() if now - w.last_seen_at.timestamp() < 0.9}  # beat < 1 s ago
    supervisor.signal(signal.SIGTERM)
    assert supervisor.wait() == 0
    left = {w.id for w in store.workers()}
    assert not serving & left  # the children it stopped left the registry (crashed ones cannot)


def test_thread_pool_timeouts_fail_jobs_and_a_worker_with_every_slot_stuck_exits(
    handle: StoreHandle, spawn: Spawner
) -> None:
    store = handle.store
    worker = spawn.worker("--concurrency", "2", name="w-t")
    job = store.enqueue("sleep", {"seconds": 2}, timeout_s=0.3, max_retries=0)
    after = store.enqueue("noop")  # runs in the other slot meanwhile

    failed = wait_until(lambda: job_is(store, job.id, "Failed"), what="job failed by its timeout")
    assert failed.error["type"] == "JobTimeout"
    wait_until(lambda: job_is(store, after.id, "Completed"), what="the other slot kept serving")
    refused = wait_until(
        lambda: events(store, job.id, "completion_refused"), what="the abandoned thread's ack"
    )
    assert [(e.actor, e.token) for e in refused] == [("w-t", 1)]
    assert store.get(job.id).status.name == "Failed"

    stuck = [store.enqueue("sleep", {"seconds": 120}, timeout_s=0.3, max_retries=0) for _ in range(2)]
    assert worker.wait() == EXIT_SLOTS_LOST  # both slots held by threads it gave up on
    for j in stuck:
        gone = store.get(j.id)
        assert gone.status.name == "Failed" and gone.error["type"] == "JobTimeout"
    assert not registered(store, "w-t")
