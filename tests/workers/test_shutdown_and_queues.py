"""Graceful shutdown gives unfinished leases back; weighted queues keep a
light queue moving under a flood."""

from __future__ import annotations

import signal

from store.models import JobSpec
from tests.backends import StoreHandle
from tests.workers.procs import Spawner, events, job_is, registered, wait_until


def test_sigterm_releases_an_unfinished_job_to_another_worker(handle: StoreHandle, spawn: Spawner) -> None:
    store = handle.store
    procs = {n: spawn.worker("--concurrency", "1", "--grace", "0.5", name=n) for n in ("w-a", "w-b")}
    wait_until(lambda: all(registered(store, n) for n in procs), what="both workers registered")
    job = store.enqueue("sleep_first", {"seconds": 120})  # longer than the grace
    held = wait_until(lambda: job_is(store, job.id, "InProgress"), what="job claimed")
    [survivor] = [n for n in procs if n != held.worker_id]

    procs[held.worker_id].signal(signal.SIGTERM)
    assert procs[held.worker_id].wait() == 0
    assert not registered(store, held.worker_id)
    [released] = events(store, job.id, "released")
    assert (released.actor, released.token) == (held.worker_id, held.lease_token)

    done = wait_until(lambda: job_is(store, job.id, "Completed"), what="job completed by the other worker")
    assert done.worker_id == survivor
    assert (done.retry_count, done.lease_expirations) == (0, 0)  # a release is not a failure
    assert not events(store, job.id, "lease_expired")  # nobody waited for the lease to expire


def test_a_flooded_queue_does_not_starve_a_light_one(handle: StoreHandle, spawn: Spawner) -> None:
    store = handle.store
    flood = store.enqueue_many([JobSpec("noop", {"i": i}, queue="a") for i in range(500)])
    light = store.enqueue_many([JobSpec("noop", {"i": i}, queue="b") for i in range(5)])  # enqueued last
    spawn.worker("--queues", "a,b", "--concurrency", "2", name="w-q")

    wait_until(
        lambda: store.counts().by_status["Completed"] == len(flood) + len(light),
        timeout=120,
        what="all jobs done",
    )
    light_done = max(store.get(j.id).completed_at for j in light)
    flood_jobs = store.list_jobs(queue="a", limit=500).items
    flood_before = sum(1 for j in flood_jobs if j.completed_at < light_done)
    assert flood_before < 100, f"{flood_before} of the flood completed before the light queue was done"
