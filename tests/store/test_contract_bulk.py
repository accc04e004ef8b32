"""Contract: bulk operations on the whole filter (store/bulk.py) on every
store — every matching job acted on once in bounded batches, progress saved
after each batch, resumable, idempotent by operation id, audited."""

from __future__ import annotations

import pytest

from store import bulk
from store.base import JobStore
from store.errors import ValidationError
from store.lifecycle import EventKind, JobStatus
from tests.store.helpers import ERROR

S = JobStatus


def _failed(store: JobStore, n: int, queue: str) -> list[str]:
    store.enqueue_many([("t", {"i": i}, queue) for i in range(n)])
    ids = []
    while claimed := store.claim("w", [queue], 500):
        for job in claimed:
            store.fail(job.id, job.lease_token, ERROR, permanent=True)
            ids.append(job.id)
    return ids


def test_requeue_every_failed_job_of_a_queue_in_batches(store: JobStore) -> None:
    target = _failed(store, 45, "mail")
    other = _failed(store, 3, "other")
    op = bulk.start(store, "requeue", {"status": "failed", "queue": "mail"}, "operator:ann", expected=45)
    assert (op.state, op.filter, op.changed) == ("queued", {"status": "Failed", "queue": "mail"}, 0)
    late = _failed(store, 1, "mail")  # failed after the operation started: not in its walk
    batches = 0
    while not op.finished:
        op = bulk.run_batch(store, op, batch=10)
        batches += 1
        assert store.get_operation(op.id) == op  # progress saved after each batch
    assert (op.state, op.changed, op.skipped, batches) == ("done", 45, 0, 5)
    assert all(store.get(i).status is S.Queued for i in target)
    assert all(store.get(i).status is S.Failed for i in other + late)
    assert op.to_json()["progress"] == 1.0
    audit = [(e.kind, e.actor) for e in store.audit()[:2]]
    assert audit[0] == (EventKind.BULK_FINISHED, "operator:ann")
    assert any(e.kind == EventKind.BULK_STARTED and "45 jobs" in (e.message or "") for e in store.audit())


def test_a_batch_run_again_after_a_crash_acts_on_no_job_twice(store: JobStore) -> None:
    _failed(store, 12, "default")
    op = bulk.start(store, "requeue", {"status": "Failed"}, "operator:ann", expected=12)
    saved = op
    bulk.run_batch(store, op, batch=5)
    op = bulk.run_batch(store, saved, batch=5)  # the first batch's progress "was lost"
    while not op.finished:
        op = bulk.run_batch(store, op, batch=5)
    requeues = [
        e for j in store.list_jobs(limit=100).items for e in store.events(j.id) if e.kind == "requeued"
    ]
    assert len(requeues) == 12  # each job requeued once


def test_jobs_that_no_longer_allow_the_action_are_skipped(store: JobStore) -> None:
    ids = _failed(store, 4, "default")
    op = bulk.start(store, "retry", {"queue": "default"}, "operator:ann", expected=4)
    store.requeue(ids[0], actor="operator:bob")  # moved since: leaves the walk
    store.enqueue("t")  # Queued before the walk? enqueued after start: not in it
    op = bulk.run_batch(store, op, batch=50)
    assert (op.state, op.changed) == ("done", 3)


def test_delete_and_idempotency_by_id(store: JobStore) -> None:
    _failed(store, 3, "default")
    first = bulk.start(store, "delete", {"status": "Failed"}, "operator:ann", 3, operation_id="op-1")
    again = bulk.start(store, "delete", {"status": "Failed"}, "operator:ann", 3, operation_id="op-1")
    assert again == first
    assert bulk.run_pending(store, "maintenance") >= 1
    done = store.get_operation("op-1")
    assert (done.state, done.changed) == ("done", 3)
    assert store.counts().by_status["Failed"] == 0
    assert [o.id for o in store.operations()] == ["op-1"] and store.operations(unfinished=True) == []


@pytest.mark.parametrize(
    ("action", "filter_", "field"),
    [
        ("explode", {}, "action"),
        ("cancel", {"colour": "red"}, "filter"),
        ("cancel", {"status": "x"}, "status"),
    ],
)
def test_bad_operations_are_refused(store: JobStore, action: str, filter_: dict, field: str) -> None:
    with pytest.raises(ValidationError) as exc:
        bulk.start(store, action, filter_, "operator:ann", 1)
    assert exc.value.field == field
    assert store.operations() == []
