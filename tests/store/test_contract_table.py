"""Contract: every store does what the lifecycle table says an operation
does (its target, event kind, stamped and cleared fields), and keeps what the
contract says it keeps (operator audit entries through purge, a job's newest
events, a bounded recovery history)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from store.base import JobStore, StoreSettings
from store.lifecycle import (
    OPERATIONS,
    EventKind,
    JobStatus,
    Operation,
    enqueue_target,
    enqueue_times,
    failure_event_kind,
    rule,
)
from store.models import Job, JobSpec, Lease, RecoveryRun
from tests.store.helpers import ERROR, expire_leases, job_in

S = JobStatus


def _claimed(store: JobStore) -> Job:
    store.enqueue("t", {"n": 1}, delay_s=0)
    [job] = store.claim("w-1", ["default"], 1)
    return job


def _unblocked(store: JobStore) -> Job:
    parent = _claimed(store)
    child = store.enqueue("t", {"n": 2}, depends_on=[parent.id])
    store.complete(parent.id, parent.lease_token, None)
    return store.get(child.id)


def _expired(store: JobStore) -> Job:
    job = store.enqueue("t", {"n": 1}, expires_in_s=10)
    store.clock_offset_s += 11  # type: ignore[attr-defined]
    assert store.claim("w-1", ["default"], 1) == []
    return store.get(job.id)


#: For each operation: put a job where it can start, run it, return the job after.
DRIVE: dict[Operation, Callable[[JobStore], Job]] = {
    Operation.ENQUEUE: lambda store: store.enqueue("t", {"n": 1}),
    Operation.CLAIM: lambda store: (job_in(store, S.Queued), store.claim("w-1", ["default"], 1)[0])[1],
    Operation.COMPLETE: lambda store: store.complete((j := _claimed(store)).id, j.lease_token, {"ok": 1}),
    Operation.FAIL: lambda store: store.fail((j := _claimed(store)).id, j.lease_token, ERROR),
    Operation.RELEASE: lambda store: store.release((j := _claimed(store)).id, j.lease_token, "w-1"),
    Operation.CANCEL: lambda store: store.cancel(_claimed(store).id, actor="operator:ann"),
    Operation.REQUEUE: lambda store: store.requeue(job_in(store, S.Failed).id, actor="operator:ann"),
    Operation.RETRY_NOW: lambda store: store.retry_now(job_in(store, S.Failed).id, actor="operator:ann"),
    Operation.UNBLOCK: _unblocked,
    Operation.EXPIRE: _expired,
}


@pytest.mark.parametrize("op", list(DRIVE))
def test_operation_does_what_the_table_says(store: JobStore, op: Operation) -> None:
    row = rule(op)
    after = DRIVE[op](store)
    assert after.status in row.targets
    for field in row.clears:
        if hasattr(after, field):
            assert getattr(after, field) is None, f"{op.value} must clear {field}"
    for field in row.stamps:
        if hasattr(after, field):
            assert getattr(after, field) == after.last_updated_at, f"{op.value} must stamp {field}"
    event = store.events(after.id)[-1]
    expected = row.event or failure_event_kind(after.status, expired=False)
    assert event.kind == expected
    assert (event.to_status, event.kind in set(EventKind)) == (after.status, True)
    assert store.event_counts()[expected.value] >= 1


@pytest.mark.parametrize("delay_s", [0.0, 30.0], ids=["due", "delayed"])
def test_enqueue_writes_what_its_row_says(store: JobStore, delay_s: float) -> None:
    """ENQUEUE's row: its target by the delay, zeroes, stamps, delays and
    held fields (retry_delay_until only while the delay holds the job), on
    the job enqueue returns and the job read back, one job and a chunk."""
    row = rule(Operation.ENQUEUE)
    one = store.enqueue("t", {"n": 1}, delay_s=delay_s)
    [many, _] = store.enqueue_many([JobSpec("t", {"n": n}, delay_s=delay_s) for n in (2, 3)])
    for job in (one, store.get(one.id), many, store.get(many.id)):
        assert job.status is enqueue_target(delay_s) and job.status in row.targets
        assert {f: getattr(job, f) for f in row.zeroes} == dict.fromkeys(row.zeroes, 0)
        assert job.created_at is not None
        times = enqueue_times(job.created_at.timestamp(), delay_s)
        wanted = {f: t for f, t in times.items() if hasattr(job, f)}  # due_at is the store's
        assert "retry_delay_until" in wanted
        got = {f: None if getattr(job, f) is None else getattr(job, f).timestamp() for f in wanted}
        assert got == pytest.approx(wanted, abs=2e-3), job
        assert (row.held and job.retry_delay_until is None) == (delay_s == 0)
    first = store.events(one.id)[0]
    assert (first.kind, first.from_status, first.to_status) == (row.event, None, one.status)


def test_every_operation_is_driven() -> None:
    """DELETE leaves no job to look at: test_contract_operating covers it."""
    assert set(DRIVE) | {Operation.DELETE} == set(OPERATIONS)


def test_refusals_use_the_table_kinds(store: JobStore) -> None:
    job = _claimed(store)
    store.cancel(job.id, actor="operator:ann")
    result = store.heartbeat("w-1", [Lease(job.id, job.lease_token)])
    assert result.refused and not result.deferred
    kinds = [e.kind for e in store.events(job.id)]
    assert kinds[-1] == EventKind.HEARTBEAT_REFUSED
    with pytest.raises(Exception):
        store.complete(job.id, job.lease_token, None, worker_id="w-1")
    assert store.events(job.id)[-1].kind == rule(Operation.COMPLETE).refusal


def test_uncontended_heartbeat_defers_nothing(store: JobStore) -> None:
    job = _claimed(store)
    result = store.heartbeat("w-1", [Lease(job.id, job.lease_token)])
    assert [x.job_id for x in result.renewed] == [job.id]
    assert result.refused == [] and result.deferred == []


def test_purge_keeps_operator_audit_entries(store: JobStore) -> None:
    job = store.enqueue("t")
    store.cancel(job.id, actor="operator:ann")
    other = job_in(store, S.Completed)
    assert {e.job_id for e in store.audit()} == {job.id}
    expire_leases(store, 3600)
    assert store.purge(60) == 2
    audit = store.audit()
    assert [(e.job_id, e.kind, e.actor) for e in audit] == [(job.id, EventKind.CANCELED, "operator:ann")]
    assert store.events(other.id) == []
    assert store.counts().by_status["Canceled"] == 0


def test_a_job_keeps_its_newest_events(store: JobStore) -> None:
    """Stores may cap a job's events at settings.events_per_job (Redis does,
    SQL keeps all); every store keeps at least the newest that many."""
    kept = store.settings.events_per_job
    job = store.enqueue("t", max_retries=0)
    for _ in range(3):
        store.cancel(job.id, actor="operator:ann")
        store.requeue(job.id, actor="operator:ann")
    events = store.events(job.id, limit=kept)
    assert len(events) == min(kept, 7)
    assert events[-1].kind == EventKind.REQUEUED and events[0].kind == EventKind.ENQUEUED


@pytest.fixture
def store_settings() -> StoreSettings:
    return StoreSettings(recovery_runs_kept=3)


def test_recovery_history_keeps_the_newest_runs(store: JobStore) -> None:
    for i in range(5):
        at = datetime(2026, 1, 1, 0, i, tzinfo=UTC)
        store.record_recovery_run(RecoveryRun(f"run-{i}", at, at, "owner", "periodic", i, 0, 1.0))
    assert [r.id for r in store.recovery_runs()] == ["run-4", "run-3", "run-2"]
