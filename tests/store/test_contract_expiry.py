"""Contract: time on enqueue. ``run_at`` runs a job no earlier than it (the
store's clock); a job past its ``expires_at`` is never handed to a worker: the
claim that reaches it ends it Canceled with error type Expired
(lifecycle.Operation.EXPIRE), also after its queue was paused, and a retry
due after the deadline too, and a job whose worker died (its lease expired,
recovery rescheduled it) once the deadline passes. The clock is moved, never
slept on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from store.base import JobStore
from store.errors import LeaseLost, ValidationError
from store.lifecycle import EXPIRED_ERROR_TYPE, EventKind, JobStatus, expiry_error
from store.models import JobSpec
from tests.store.helpers import ERROR, expire_leases

S = JobStatus


def _claim_ids(store: JobStore, queue: str = "default", limit: int = 10) -> list[str]:
    return [j.id for j in store.claim("w-1", [queue], limit=limit)]


def _assert_expired(store: JobStore, job_id: str) -> None:
    job = store.get(job_id)
    assert job.status is S.Canceled
    assert job.error == expiry_error() and job.error["type"] == EXPIRED_ERROR_TYPE
    assert job.expires_at is not None and job.completed_at is not None
    assert job.completed_at >= job.expires_at
    kinds = [e.kind for e in store.events(job_id)]
    assert kinds[-1] == EventKind.EXPIRED.value
    assert EventKind.CLAIMED.value not in kinds or job.retry_count + job.lease_expirations > 0


def test_run_at_runs_no_earlier_than_it_by_the_store_clock(store: JobStore) -> None:
    at = store.now() + 60
    job = store.enqueue("t", run_at=at)
    assert job.status is S.Scheduled
    assert job.retry_delay_until is not None
    assert job.retry_delay_until.timestamp() == pytest.approx(at, abs=0.5)
    assert job.retry_delay_until.timestamp() >= at - 0.001
    store.clock_offset_s += 58
    assert _claim_ids(store) == []
    store.clock_offset_s += 3
    assert _claim_ids(store) == [job.id]


def test_run_at_takes_an_aware_datetime_and_a_past_one_is_due_now(store: JobStore) -> None:
    later = datetime.fromtimestamp(store.now() + 120, tz=timezone(timedelta(hours=5)))
    scheduled = store.enqueue("t", run_at=later)
    past = store.enqueue("t", run_at=datetime.fromtimestamp(store.now() - 5, tz=UTC))
    assert (scheduled.status, past.status) == (S.Scheduled, S.Queued)
    assert _claim_ids(store) == [past.id]


def test_an_expired_job_is_never_run(store: JobStore) -> None:
    job = store.enqueue("t", {"x": 1}, expires_in_s=30)
    assert job.expires_at is not None
    assert job.expires_at.timestamp() == pytest.approx(store.now() + 30, abs=1)
    assert store.get(job.id).expires_at == job.expires_at
    store.clock_offset_s += 31
    assert _claim_ids(store) == []
    _assert_expired(store, job.id)
    assert store.counts().by_status["Canceled"] == 1
    assert _claim_ids(store) == []


def test_a_job_is_claimed_before_its_expiry_and_keeps_it(store: JobStore) -> None:
    at = store.now() + 300
    job = store.enqueue("t", expires_at=at)
    [claimed] = store.claim("w-1", ["default"])
    assert claimed.id == job.id and claimed.expires_at == job.expires_at
    done = store.complete(job.id, claimed.lease_token, {"ok": True})
    assert done.status is S.Completed
    assert store.get(job.id).to_json()["expires_at"] is not None


def test_a_job_that_expired_while_its_queue_was_paused_is_never_run(store: JobStore) -> None:
    store.pause_queue("slow")
    job = store.enqueue("t", queue="slow", expires_in_s=10)
    keep = store.enqueue("t", queue="slow", expires_in_s=600)
    store.clock_offset_s += 11
    assert _claim_ids(store, "slow") == []
    assert store.get(job.id).status is S.Queued  # not decided while paused
    store.resume_queue("slow")
    assert _claim_ids(store, "slow") == [keep.id]
    assert _claim_ids(store, "slow") == []
    _assert_expired(store, job.id)


def test_expired_heads_do_not_starve_a_claim(store: JobStore) -> None:
    past = store.now() - 1
    dead = [store.enqueue("t", {"i": i}, expires_at=past, priority=5) for i in range(3)]
    live = store.enqueue("t", {"i": 9})
    assert _claim_ids(store, limit=1) == [live.id]
    assert _claim_ids(store) == []
    for job in dead:
        _assert_expired(store, job.id)


def test_a_retry_due_after_the_deadline_expires(store: JobStore) -> None:
    job = store.enqueue("t", expires_in_s=100, max_retries=3)
    [claimed] = store.claim("w-1", ["default"])
    failed = store.fail(job.id, claimed.lease_token, ERROR)
    assert failed.status is S.Scheduled
    store.clock_offset_s += 200
    assert _claim_ids(store) == []
    _assert_expired(store, job.id)
    assert len(store.attempts(job.id)) == 1


def _claimed_by_a_worker_that_dies(store: JobStore, expires_in_s: float) -> tuple[str, str]:
    """Enqueue a job with an expiry and claim it; the claimer is then gone (it
    never heartbeats, completes or fails). Returns (job id, its lease token)."""
    job = store.enqueue("t", {"x": 1}, expires_in_s=expires_in_s, max_retries=3)
    [claimed] = store.claim("w-dead", ["default"])
    assert claimed.id == job.id and claimed.lease_token is not None
    return job.id, claimed.lease_token


def _due_again(store: JobStore, job_id: str) -> float:
    """After recovery rescheduled ``job_id`` (a lease expiry, a retry left):
    when its retry is due, by the store's clock."""
    job = store.get(job_id)
    assert job.status is S.Scheduled and job.lease_expirations == 1
    assert job.retry_delay_until is not None
    return job.retry_delay_until.timestamp()


def _never_handed_out_again(store: JobStore, job_id: str, token: str) -> None:
    live = store.enqueue("t", {"live": True})
    assert _claim_ids(store) == [live.id]  # the claim ran and passed over it
    assert _claim_ids(store) == []
    _assert_expired(store, job_id)
    assert len(store.attempts(job_id)) == 1  # only the dead worker's attempt
    with pytest.raises(LeaseLost):  # the dead worker's late ack is refused (and recorded as such)
        store.complete(job_id, token, {"late": True})
    job = store.get(job_id)
    assert (job.status, job.error, job.result) == (S.Canceled, expiry_error(), None)


def test_a_job_that_expired_while_its_worker_was_down_is_never_run(store: JobStore) -> None:
    job_id, token = _claimed_by_a_worker_that_dies(store, expires_in_s=store.settings.lease_ttl_s / 2)
    deadline = store.get(job_id).expires_at
    assert deadline is not None
    expire_leases(store)  # the lease and the deadline both pass while no worker runs
    assert store.now() > deadline.timestamp()
    assert [r.job_id for r in store.recover_expired().recovered] == [job_id]
    due = _due_again(store, job_id)
    assert _claim_ids(store) == []  # its retry not yet due, or due and expired: never leased
    store.clock_offset_s += max(0.0, due - store.now()) + 1
    _never_handed_out_again(store, job_id, token)


def test_a_job_recovery_rescheduled_before_its_deadline_expires_while_it_waits(store: JobStore) -> None:
    ttl = store.settings.lease_ttl_s
    job_id, token = _claimed_by_a_worker_that_dies(store, expires_in_s=ttl + 3600)
    deadline = store.get(job_id).expires_at
    assert deadline is not None
    expire_leases(store)
    assert [r.job_id for r in store.recover_expired().recovered] == [job_id]
    due = _due_again(store, job_id)
    assert due < deadline.timestamp()  # requeued with time to spare: it would have run
    store.clock_offset_s += deadline.timestamp() - store.now() + 1  # no claim until the deadline passed
    assert store.now() > deadline.timestamp()
    _never_handed_out_again(store, job_id, token)


def test_enqueue_many_and_a_delay_with_expiry(store: JobStore) -> None:
    a, b = store.enqueue_many(
        [JobSpec("t", {"i": 1}, expires_in_s=5), JobSpec("t", {"i": 2}, delay_s=10, expires_in_s=20)]
    )
    assert a.expires_at is not None and b.expires_at is not None and b.status is S.Scheduled
    store.clock_offset_s += 12
    assert _claim_ids(store) == [b.id]
    _assert_expired(store, a.id)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"run_at": 2e9, "delay_s": 5}, "run_at"),
        ({"run_at": datetime(2030, 1, 1)}, "run_at"),  # naive on purpose
        ({"expires_at": datetime(2030, 1, 1)}, "expires_at"),
        ({"run_at": 2e9, "expires_at": 2e9}, "expires_at"),
        ({"expires_at": 2e9, "expires_in_s": 5}, "expires_in_s"),
        ({"delay_s": 10, "expires_in_s": 10}, "expires_in_s"),
        ({"expires_in_s": -1}, "expires_in_s"),
        ({"run_at": float("nan")}, "run_at"),
        ({"run_at": "tomorrow"}, "run_at"),
    ],
)
def test_bad_times_are_refused_naming_the_field(store: JobStore, options: dict, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        store.enqueue("t", **options)
    assert err.value.field == field
    assert sum(store.counts().by_status.values()) == 0


def test_an_expiry_before_the_delay_ends_is_refused(store: JobStore) -> None:
    with pytest.raises(ValidationError) as err:
        store.enqueue("t", delay_s=60, expires_at=store.now() + 30)
    assert err.value.field == "expires_at"


def test_an_expired_parent_cancels_its_waiting_child(store: JobStore) -> None:
    if not store.supports_flow:
        pytest.skip("flow control")
    parent = store.enqueue("t", expires_at=store.now() - 1)
    child = store.enqueue("t", depends_on=(parent.id,))
    assert child.status is S.Scheduled
    assert _claim_ids(store) == []
    _assert_expired(store, parent.id)
    assert store.get(child.id).status is S.Canceled


def test_an_expired_job_of_a_limited_queue_is_never_run(store: JobStore) -> None:
    if not store.supports_flow:
        pytest.skip("flow control")
    from store.flow_rules import QueueLimits

    store.set_queue_limits("lim", QueueLimits(concurrency=2))
    dead = store.enqueue("t", queue="lim", expires_at=store.now() - 1)
    live = store.enqueue("t", queue="lim")
    assert _claim_ids(store, "lim") == [live.id]
    assert _claim_ids(store, "lim") == []
    _assert_expired(store, dead.id)


def test_a_batch_takes_run_at_and_expiry(store: JobStore) -> None:
    if not store.supports_flow:
        pytest.skip("flow control")
    batch = store.create_batch(
        [JobSpec("t", {"i": 1}, expires_in_s=5), JobSpec("t", {"i": 2}, run_at=store.now() + 30)]
    )
    first, second = (store.get(i) for i in batch.job_ids)
    assert first.expires_at is not None and second.status is S.Scheduled
    store.clock_offset_s += 31
    assert _claim_ids(store) == [second.id]
    _assert_expired(store, first.id)
