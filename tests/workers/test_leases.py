"""Leases under real failures: kill -9, a paused process, a long job kept
alive by heartbeats. Two workers on one store, 1 s leases, recovery every
0.2 s; the victim is whichever worker claimed the job."""

from __future__ import annotations

import signal

import pytest

from store.errors import LeaseLost
from tests.backends import StoreHandle
from tests.workers.procs import Proc, Spawner, events, job_is, pause, registered, wait_until

#: LEASEHOLD_LEASE_TTL + LEASEHOLD_RECOVERY_INTERVAL of the workers (procs.WORKER_ENV).
RECOVERY_BOUND_S = 1.0 + 0.2
#: Added to timing bounds for a loaded two-core machine.
SLACK_S = 5.0


def start_pair(spawn: Spawner, handle: StoreHandle, *args: str) -> dict[str, Proc]:
    procs = {name: spawn.worker("--concurrency", "1", *args, name=name) for name in ("w-a", "w-b")}
    wait_until(lambda: all(registered(handle.store, n) for n in procs), what="both workers registered")
    return procs


def other(procs: dict[str, Proc], name: str) -> str:
    [survivor] = [n for n in procs if n != name]
    return survivor


def test_killed_worker_job_is_recovered_completed_elsewhere_and_replay_refused(
    handle: StoreHandle, spawn: Spawner
) -> None:
    store = handle.store
    procs = start_pair(spawn, handle)
    job = store.enqueue("sleep_first", {"seconds": 120})
    held = wait_until(lambda: job_is(store, job.id, "InProgress"), what="job claimed")
    victim, survivor = held.worker_id, other(procs, held.worker_id)

    procs[victim].signal(signal.SIGKILL)
    procs[victim].wait()
    killed_at = store.now()

    done = wait_until(lambda: job_is(store, job.id, "Completed"), what="job completed by the survivor")
    assert done.worker_id == survivor
    assert done.result["worker"] == survivor
    assert (done.retry_count, done.lease_expirations) == (1, 1)
    [expired] = events(store, job.id, "lease_expired")
    assert expired.at.timestamp() - killed_at <= RECOVERY_BOUND_S + SLACK_S

    with pytest.raises(LeaseLost):  # the dead worker's completion, replayed, is fenced off
        store.complete(job.id, held.lease_token, {"worker": victim}, worker_id=victim)
    after = store.get(job.id)
    assert after.status.name == "Completed" and after.result["worker"] == survivor
    assert len(events(store, job.id, "completed")) == 1


def test_heartbeats_keep_a_long_job_while_a_paused_worker_loses_its_lease(
    handle: StoreHandle, spawn: Spawner
) -> None:
    """Two scenarios side by side (one 10 s window): a job running 10 lease
    TTLs on a live worker is never reclaimed; a job whose worker is paused
    (SIGSTOP) past its lease is recovered, run by another worker, and the
    paused worker's completion after SIGCONT is refused."""
    store = handle.store
    keeper = spawn.worker("--concurrency", "1", "--queues", "long", name="w-long")
    procs = start_pair(spawn, handle)
    wait_until(lambda: registered(store, "w-long"), what="the long-job worker registered")
    long_job = store.enqueue("sleep", {"seconds": 10}, queue="long")  # 10 x LEASEHOLD_LEASE_TTL
    job = store.enqueue("sleep_first", {"seconds": 1.5})
    held = wait_until(lambda: job_is(store, job.id, "InProgress"), what="job claimed")
    victim, survivor = held.worker_id, other(procs, held.worker_id)

    pause(procs[victim], handle.url)  # it stops heartbeating: recovered, then run by the survivor
    done = wait_until(lambda: job_is(store, job.id, "Completed"), what="job completed by the survivor")
    assert done.worker_id == survivor and done.lease_expirations == 1
    procs[victim].signal(signal.SIGCONT)

    # Awake again, the paused worker is fenced off: either its renewal is refused
    # first (it then drops the run without acking) or its late ack is refused.
    def late_refusals() -> list:
        return [e for e in store.events(job.id) if e.kind in ("completion_refused", "heartbeat_refused")]

    refused = wait_until(late_refusals, what="the paused worker's late heartbeat or completion")
    assert {(e.actor, e.token) for e in refused} == {(victim, held.lease_token)}
    assert [e.actor for e in events(store, job.id, "completed")] == [survivor]
    final = store.get(job.id)
    assert final.status.name == "Completed" and final.result["worker"] == survivor

    kept = wait_until(lambda: job_is(store, long_job.id, "Completed"), timeout=120, what="long job completed")
    assert kept.worker_id == "w-long" and keeper.alive()
    assert (kept.retry_count, kept.lease_expirations) == (0, 0)
    assert len(events(store, long_job.id, "claimed")) == 1
    assert not events(store, long_job.id, "heartbeat_refused")
    assert not events(store, long_job.id, "lease_expired")
