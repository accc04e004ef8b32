"""Contract: operator cancel, requeue and retry-now, legal and illegal."""

from __future__ import annotations

import pytest

from store.base import JobStore
from store.errors import InvalidTransition, JobNotFound, LeaseLost
from store.lifecycle import OPERATIONS, JobStatus, Operation
from store.models import Lease
from tests.store.helpers import job_in

S = JobStatus
ACTIONS = {
    Operation.CANCEL: lambda store, job_id: store.cancel(job_id, actor="operator:ann"),
    Operation.REQUEUE: lambda store, job_id: store.requeue(job_id, actor="operator:ann"),
    Operation.RETRY_NOW: lambda store, job_id: store.retry_now(job_id, actor="operator:ann"),
}


@pytest.mark.parametrize("status", list(S))
@pytest.mark.parametrize("op", list(ACTIONS))
def test_operator_action_from_every_status(store: JobStore, op: Operation, status: JobStatus) -> None:
    job = job_in(store, status)
    before = store.counts()
    if status in OPERATIONS[op].sources:
        after = ACTIONS[op](store, job.id)
        [target] = OPERATIONS[op].targets
        assert after.status is target
        event = store.events(job.id)[-1]
        assert (event.from_status, event.to_status, event.actor) == (status, target, "operator:ann")
        counts = store.counts().by_status
        assert counts[target.name] == before.by_status[target.name] + 1
        assert counts[status.name] == before.by_status[status.name] - 1
    else:
        with pytest.raises(InvalidTransition):
            ACTIONS[op](store, job.id)
        assert store.get(job.id) == job
        assert store.counts() == before


def test_unknown_job(store: JobStore) -> None:
    with pytest.raises(JobNotFound):
        store.cancel("00000000-0000-0000-0000-000000000000")


def test_cancel_revokes_a_running_lease(store: JobStore) -> None:
    job = store.enqueue("t")
    [c] = store.claim("w", ["default"], 1)
    store.cancel(job.id)
    assert store.heartbeat("w", [Lease(job.id, c.lease_token)]).refused
    with pytest.raises(LeaseLost):
        store.complete(job.id, c.lease_token, None)
    assert store.get(job.id).status is S.Canceled
    assert store.expired_lease_count() == 0


def test_requeue_fresh_or_continue(store: JobStore) -> None:
    job = store.enqueue("t", max_retries=1)
    [c] = store.claim("w", ["default"], 1)
    store.fail(job.id, c.lease_token, {"type": "E", "message": "m", "traceback": None})
    store.retry_now(job.id)
    [c] = store.claim("w", ["default"], 1)
    failed = store.fail(job.id, c.lease_token, {"type": "E", "message": "m", "traceback": None})
    assert (failed.status, failed.retry_count) == (S.Failed, 1)
    kept = store.requeue(job.id, reset_retries=False)
    assert (kept.status, kept.retry_count) == (S.Queued, 1)
    store.cancel(job.id)
    fresh = store.requeue(job.id)
    assert (fresh.status, fresh.retry_count, fresh.lease_expirations) == (S.Queued, 0, 0)
    [again] = store.claim("w", ["default"], 1)
    assert again.lease_token == c.lease_token + 1  # tokens are never reused


def test_retry_now_makes_a_scheduled_job_due(store: JobStore) -> None:
    job = store.enqueue("t", delay_s=3600)
    assert store.claim("w", ["default"], 1) == []
    assert store.retry_now(job.id).status is S.Queued
    assert [j.id for j in store.claim("w", ["default"], 1)] == [job.id]


def test_audit_lists_operator_actions_newest_first(store: JobStore) -> None:
    a, b = store.enqueue("t"), store.enqueue("t")
    store.claim("w-1", ["default"], 1)  # worker events are not audited
    store.cancel(b.id, actor="operator:ann")
    store.requeue(b.id, actor="operator:bob")
    audit = store.audit(limit=10)
    assert [(e.job_id, e.kind, e.actor) for e in audit] == [
        (b.id, "requeued", "operator:bob"),
        (b.id, "canceled", "operator:ann"),
    ]
    assert a.id not in {e.job_id for e in audit}
    assert len(store.audit(limit=1)) == 1
