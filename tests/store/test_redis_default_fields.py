"""Job hashes without their default-valued fields (Redis): ``retry_count``,
``lease_token`` and ``lease_expirations`` absent mean 0, ``priority``
absent means 0. Enqueue leaves them out (one enqueue: 222.7k -> 211.4k
server instructions without the three zeroes); the release before read such
hashes already, so the two can run side by side. A Lua error in the middle of a function keeps the writes made
before it, so every function is driven here over a hash that lacks them:
each operation gives what it gives for a hash that has them."""

from __future__ import annotations

import pytest

from store.errors import LeaseLost
from store.lifecycle import JobStatus
from store.models import Lease
from store.redis.store import RedisStore
from tests.conftest import handle_fixture
from tests.store.helpers import expire_leases

handle = handle_fixture(["redis"])

S = JobStatus
DEFAULTED = ("retry_count", "lease_token", "lease_expirations", "priority")
ERROR = {"type": "E", "message": "boom", "traceback": None}


def lean(store: RedisStore, queue: str = "default", **options: object) -> str:
    """A job as enqueue writes it: without the defaulted fields."""
    job = store.enqueue("t", {"n": 1}, queue=queue, **options)  # type: ignore[arg-type]
    assert store._client.hmget(store.keys.job(job.id), *DEFAULTED) == [None] * len(DEFAULTED)
    return job.id


def test_a_lean_job_reads_as_its_defaults_and_is_claimed_with_token_1(store: RedisStore) -> None:
    job_id = lean(store)
    job = store.get(job_id)
    assert (job.retry_count, job.lease_token, job.lease_expirations, job.priority) == (0, 0, 0, 0)
    [claimed] = store.claim("w", ["default"])
    assert (claimed.id, claimed.lease_token) == (job_id, 1)
    assert claimed == store.get(job_id)


def test_heartbeat_progress_and_ack_of_a_lean_job(store: RedisStore) -> None:
    job_id = lean(store)
    [job] = store.claim("w", ["default"])
    renewed = store.heartbeat("w", [Lease(job_id, job.lease_token)])
    assert not renewed.refused
    store.report_progress(job_id, job.lease_token, 0.5, "half")
    done = store.complete(job_id, job.lease_token, {"ok": True})
    assert (done.status, done.lease_token, done.retry_count) == (S.Completed, 1, 0)


def test_a_lean_job_that_was_never_claimed_refuses_a_worker_with_the_token_it_has(store: RedisStore) -> None:
    job_id = lean(store)
    with pytest.raises(LeaseLost):
        store.complete(job_id, 1, None)
    assert store.get(job_id).status is S.Queued


def test_failure_retry_recovery_and_release_of_lean_jobs(store: RedisStore) -> None:
    failing = lean(store, max_retries=2)
    [job] = store.claim("w", ["default"])
    retried = store.fail(failing, job.lease_token, ERROR)
    assert (retried.status, retried.retry_count) == (S.Scheduled, 1)

    expiring = lean(store, queue="q2", max_retries=2)
    [job] = store.claim("w", ["q2"])
    expire_leases(store)
    report = store.recover_expired(10)
    assert [r.job_id for r in report.recovered] == [expiring]
    back = store.get(expiring)
    assert (back.status, back.retry_count, back.lease_expirations) == (S.Scheduled, 1, 1)

    released = lean(store, queue="q3")
    [job] = store.claim("w", ["q3"])
    again = store.release(released, job.lease_token, "w")
    assert (again.status, again.retry_count, again.priority) == (S.Scheduled, 0, 0)
    [job] = store.claim("w", ["q3"])
    assert (job.id, job.lease_token) == (released, 2)


def test_operator_actions_on_lean_jobs(store: RedisStore) -> None:
    canceled = store.cancel(lean(store), actor="operator:ann")
    assert canceled.status is S.Canceled
    requeued = store.requeue(canceled.id, actor="operator:ann")
    assert (requeued.status, requeued.priority) == (S.Queued, 0)
    store._client.hdel(store.keys.job(requeued.id), *DEFAULTED)
    [job] = store.claim("w", ["default"])
    assert (job.id, job.lease_token) == (requeued.id, 1)
    store.fail(job.id, job.lease_token, ERROR, permanent=True)
    assert store.retry_now(job.id, actor="operator:ann").status is S.Queued
    gone = lean(store, queue="q4")
    store.delete(gone, actor="operator:ann")
    assert store.count_jobs(S.Queued, queue="q4") == 0
    batch = [lean(store, queue="q5") for _ in range(3)]
    [held] = store.claim("w", ["q5"])
    assert held.id == batch[0]
    assert store.cancel(held.id, actor="operator:ann").status is S.Canceled


def test_a_job_with_a_priority_keeps_it_and_a_flow_job_is_lean_too(store: RedisStore) -> None:
    urgent = store.enqueue("t", {}, priority=7)
    assert store._client.hget(store.keys.job(urgent.id), "priority") == "7"
    lean(store)
    [first] = store.claim("w", ["default"])
    assert (first.id, first.priority) == (urgent.id, 7)
    limited = store.enqueue("t", {}, queue="lim", limit_key="k")
    assert store._client.hmget(store.keys.job(limited.id), *DEFAULTED) == [None] * len(DEFAULTED)
    [job] = store.claim("w", ["lim"])
    assert (job.id, job.lease_token, job.retry_count) == (limited.id, 1, 0)
