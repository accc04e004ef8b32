"""Contract: claim, heartbeat, ack/nack with fencing tokens, release."""

from __future__ import annotations

from datetime import timedelta

import pytest

from store.base import JobStore
from store.errors import JobNotFound, LeaseLost, ValidationError
from store.lifecycle import JobStatus
from store.models import Lease
from tests.store.helpers import ERROR, expire_leases

S = JobStatus


def test_claim_takes_priority_then_fifo(store: JobStore) -> None:
    low = [store.enqueue("t", {"i": i}) for i in range(3)]
    high = store.enqueue("t", {"i": "high"}, priority=10)
    other = store.enqueue("t", queue="other")
    claimed = store.claim("w", ["default"], 10)
    assert [j.id for j in claimed] == [high.id] + [j.id for j in low]
    assert store.get(other.id).status is S.Queued
    assert store.claim("w", ["default"], 10) == []


def test_claim_sets_the_lease(store: JobStore) -> None:
    job = store.enqueue("t")
    before = store.now()
    [c] = store.claim("w-1", ["default"], 1, lease_ttl_s=20)
    assert (c.id, c.status, c.worker_id, c.lease_token) == (job.id, S.InProgress, "w-1", 1)
    assert c.started_at is not None and c.last_heartbeat_at is not None
    expected = before + 20
    assert c.lease_expires_at.timestamp() == pytest.approx(expected, abs=1.0)
    assert store.get(job.id) == c


def test_a_retried_job_claimed_reads_back_as_held(store: JobStore) -> None:
    """A claim's job is the job as the store then holds it, on a second run
    too: the backoff's retry_delay_until cleared, the error and retry count
    kept, the job's own lease TTL and payload as enqueued."""
    job = store.enqueue("t", {"n": 1}, lease_ttl_s=40)
    [first] = store.claim("w-1", ["default"], 1)
    store.fail(first.id, first.lease_token, ERROR)
    assert store.get(job.id).retry_delay_until is not None
    store.clock_offset_s += 3600
    [again] = store.claim("w-2", ["default"], 1, lease_ttl_s=5)
    assert (again.retry_count, again.lease_token, again.retry_delay_until) == (1, 2, None)
    assert again.lease_expires_at - again.started_at == pytest.approx(
        timedelta(seconds=40), abs=timedelta(seconds=0.5)
    )
    assert store.get(job.id) == again


def test_job_lease_ttl_overrides_worker_ttl(store: JobStore) -> None:
    store.enqueue("t", lease_ttl_s=2)
    [c] = store.claim("w", ["default"], 1, lease_ttl_s=100)
    assert c.lease_expires_at - c.started_at == pytest.approx(
        timedelta(seconds=2), abs=timedelta(seconds=0.5)
    )


def test_claim_batch_is_bounded_and_multi_queue(store: JobStore) -> None:
    store.enqueue_many([("t", {"i": i}, "a") for i in range(5)] + [("t", {"i": i}, "b") for i in range(5)])
    assert len(store.claim("w", ["a", "b"], 7)) == 7
    assert len(store.claim("w", ["a", "b"], 7)) == 3
    with pytest.raises(ValidationError):
        store.claim("w", [], 1)
    assert store.claim("w", ["a"], 0) == []


def test_complete_with_current_token(store: JobStore) -> None:
    job = store.enqueue("t")
    [c] = store.claim("w", ["default"], 1)
    done = store.complete(job.id, c.lease_token, {"lines": 10})
    assert (done.status, done.result) == (S.Completed, {"lines": 10})
    assert done.completed_at is not None
    assert store.counts().by_status["Completed"] == 1


def test_result_must_be_json(store: JobStore) -> None:
    job = store.enqueue("t")
    [c] = store.claim("w", ["default"], 1)
    with pytest.raises(ValidationError):
        store.complete(job.id, c.lease_token, {"x": {1, 2}})
    assert store.get(job.id).status is S.InProgress


@pytest.mark.parametrize("operation", ["complete", "fail", "release"])
def test_stale_token_is_refused_and_changes_nothing(store: JobStore, operation: str) -> None:
    job = store.enqueue("t")
    [c] = store.claim("w", ["default"], 1)
    before = store.get(job.id)
    with pytest.raises(LeaseLost) as err:
        if operation == "complete":
            store.complete(job.id, c.lease_token - 1, {"late": True}, worker_id="w-old")
        elif operation == "fail":
            store.fail(job.id, c.lease_token + 5, ERROR, worker_id="w-old")
        else:
            store.release(job.id, 0, worker_id="w-old")
    assert err.value.current_token == c.lease_token
    assert store.get(job.id) == before
    refusal = store.events(job.id)[-1]
    assert refusal.kind.endswith("_refused") and refusal.actor == "w-old"
    assert f"current token {c.lease_token}" in refusal.message
    assert store.event_counts()[refusal.kind] == 1


def test_ack_of_unknown_job(store: JobStore) -> None:
    with pytest.raises(JobNotFound):
        store.complete("00000000-0000-0000-0000-000000000000", 1, None)


def test_heartbeat_renews_current_leases_and_refuses_stale(store: JobStore) -> None:
    a, b = store.enqueue("t"), store.enqueue("t")
    ca, cb = store.claim("w", ["default"], 2)
    store.clock_offset_s += 10
    result = store.heartbeat("w", [Lease(ca.id, ca.lease_token), Lease(cb.id, cb.lease_token + 1)], 30)
    assert [lease.job_id for lease in result.renewed] == [ca.id]
    assert [lease.job_id for lease in result.refused] == [cb.id]
    renewed = store.get(a.id)
    assert renewed.lease_expires_at > ca.lease_expires_at
    assert renewed.lease_expires_at == result.renewed[0].expires_at
    assert store.get(b.id).lease_expires_at == cb.lease_expires_at
    assert store.events(b.id)[-1].kind == "heartbeat_refused"


def test_heartbeat_refuses_expired_and_canceled(store: JobStore) -> None:
    store.enqueue("t")
    store.enqueue("t")
    ca, cb = store.claim("w", ["default"], 2, lease_ttl_s=5)
    store.cancel(cb.id)
    expire_leases(store, 6)
    result = store.heartbeat("w", [Lease(ca.id, ca.lease_token), Lease(cb.id, cb.lease_token)], 5)
    assert result.renewed == []
    assert {lease.job_id for lease in result.refused} == {ca.id, cb.id}
    assert store.get(ca.id).lease_expires_at == ca.lease_expires_at


def test_a_heartbeat_overtaken_by_its_own_ack_is_refused_but_not_recorded(store: JobStore) -> None:
    """A worker renews finished runs until their acks land: a beat that
    arrives after its own ack is late, not stale. Refused (the worker drops
    the run), but no heartbeat_refused event nor count; a canceled job's
    refusal with the same token still is recorded."""
    done, canceled = store.enqueue("t"), store.enqueue("t")
    cd, cc = store.claim("w", ["default"], 2)
    store.complete(done.id, cd.lease_token, None)
    store.cancel(canceled.id)
    before = store.event_counts().get("heartbeat_refused", 0)
    result = store.heartbeat("w", [Lease(cd.id, cd.lease_token), Lease(cc.id, cc.lease_token)], 30)
    assert {lease.job_id for lease in result.refused} == {done.id, canceled.id}
    assert "heartbeat_refused" not in [e.kind for e in store.events(done.id)]
    assert store.events(canceled.id)[-1].kind == "heartbeat_refused"
    assert store.event_counts().get("heartbeat_refused", 0) == before + 1


def test_aba_late_heartbeat_and_ack_do_not_touch_new_holder(store: JobStore) -> None:
    job = store.enqueue("t")
    [a] = store.claim("worker-a", ["default"], 1, lease_ttl_s=5)
    expire_leases(store, 6)
    report = store.recover_expired()
    assert [r.job_id for r in report.recovered] == [job.id]
    store.retry_now(job.id)  # due at once instead of after the backoff
    [b] = store.claim("worker-b", ["default"], 1, lease_ttl_s=5)
    assert b.lease_token == a.lease_token + 1
    held = store.get(job.id)

    late = store.heartbeat("worker-a", [Lease(job.id, a.lease_token)], 60)
    assert late.renewed == [] and len(late.refused) == 1
    with pytest.raises(LeaseLost):
        store.complete(job.id, a.lease_token, {"from": "a"}, worker_id="worker-a")
    with pytest.raises(LeaseLost):
        store.fail(job.id, a.lease_token, ERROR, worker_id="worker-a")
    now_held = store.get(job.id)
    assert now_held.lease_expires_at == held.lease_expires_at  # A did not extend B's lease
    assert (now_held.status, now_held.worker_id, now_held.result) == (S.InProgress, "worker-b", None)
    done = store.complete(job.id, b.lease_token, {"from": "b"}, worker_id="worker-b")
    assert done.result == {"from": "b"}


def test_fail_schedules_retry_with_backoff_then_fails(store: JobStore) -> None:
    job = store.enqueue("t", max_retries=2)
    base = store.settings.retry.base_s
    for attempt in (1, 2):
        [c] = store.claim("w", ["default"], 1)
        failed = store.fail(job.id, c.lease_token, ERROR)
        assert (failed.status, failed.retry_count) == (S.Scheduled, attempt)
        assert failed.error == ERROR
        wait = (failed.retry_delay_until - failed.last_updated_at).total_seconds()
        assert wait == pytest.approx(base * 2**attempt, abs=0.5)
        assert store.claim("w", ["default"], 1) == []  # not due yet
        store.clock_offset_s += wait + 0.1
    [c] = store.claim("w", ["default"], 1)
    final = store.fail(job.id, c.lease_token, ERROR)
    assert (final.status, final.retry_count, final.lease_expirations) == (S.Failed, 2, 0)
    kinds = [e.kind for e in store.events(job.id)]
    assert kinds.count("retry_scheduled") == 2 and kinds[-1] == "failed"


def test_permanent_failure_skips_retries(store: JobStore) -> None:
    job = store.enqueue("t", max_retries=5)
    [c] = store.claim("w", ["default"], 1)
    failed = store.fail(job.id, c.lease_token, ERROR, permanent=True)
    assert (failed.status, failed.retry_count) == (S.Failed, 0)


def test_release_gives_the_lease_back_at_once(store: JobStore) -> None:
    job = store.enqueue("t")
    [c] = store.claim("w-1", ["default"], 1)
    released = store.release(job.id, c.lease_token, worker_id="w-1")
    assert (released.status, released.retry_count, released.worker_id) == (S.Scheduled, 0, None)
    [again] = store.claim("w-2", ["default"], 1)
    assert again.lease_token == c.lease_token + 1
    with pytest.raises(LeaseLost):
        store.complete(job.id, c.lease_token, None)


def test_complete_many_guards_each_ack(store: JobStore) -> None:
    jobs = store.enqueue_many([("t", {"i": i}) for i in range(4)])
    claimed = {j.id: j for j in store.claim("w", ["default"], 4)}
    a, b, c, d = (claimed[j.id] for j in jobs)
    store.cancel(d.id)
    acks = [
        (a.id, a.lease_token, {"n": 1}),
        (b.id, b.lease_token + 1, {"n": 2}),
        (c.id, c.lease_token, None),
        (d.id, d.lease_token, {"n": 4}),
        ("00000000-0000-0000-0000-000000000000", 1, None),
    ]
    out = store.complete_many(acks, worker_id="w")
    assert [type(x).__name__ for x in out] == ["Job", "LeaseLost", "Job", "LeaseLost", "LeaseLost"]
    assert (out[0].status, out[0].result) == (S.Completed, {"n": 1})
    assert (out[2].status, out[2].result) == (S.Completed, None)
    assert out[1].current_token == b.lease_token and out[3].status == "Canceled"
    assert out[4].current_token is None
    assert store.get(b.id).status is S.InProgress
    assert store.counts().by_status["Completed"] == 2
    assert store.events(b.id)[-1].kind == "completion_refused"
    assert store.complete_many([]) == []
    with pytest.raises(ValidationError):
        store.complete_many([(b.id, b.lease_token, {1, 2})])
    assert store.get(b.id).status is S.InProgress


def test_complete_many_without_jobs_writes_the_same(store: JobStore) -> None:
    a, b = store.claim("w", ["default"], 2) if store.enqueue_many([("t", None)] * 2) else []
    out = store.complete_many(
        [(a.id, a.lease_token, {"n": 1}), (b.id, b.lease_token + 1, None)], worker_id="w", return_jobs=False
    )
    assert out[0] is None and type(out[1]).__name__ == "LeaseLost"
    done = store.get(a.id)
    assert (done.status, done.result, done.lease_expires_at) == (S.Completed, {"n": 1}, None)
    assert store.events(a.id)[-1].kind == "completed"
    assert store.get(b.id).status is S.InProgress
    assert store.counts().by_status["Completed"] == 1
