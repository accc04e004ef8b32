"""Contract: what validation lets through, every store can hold (no column
narrower than its validator: PostgreSQL refused these with a 500 before), and
what it cannot hold is refused with ValidationError naming the field."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from store import bulk
from store.base import JobStore
from store.errors import ValidationError
from store.lifecycle import EventKind
from store.models import RecoveryRun, WorkerInfo
from store.spec import (
    MAX_ACTOR_LEN,
    MAX_NAME_LEN,
    MAX_OPERATION_ID_LEN,
    MAX_QUEUE_LEN,
    JobSpec,
    unique_key_of,
)

LONG_ACTOR = "operator:" + "a" * (MAX_ACTOR_LEN - len("operator:"))


def test_an_operation_id_as_long_as_validation_allows_is_stored(store: JobStore) -> None:
    key = "k" * MAX_OPERATION_ID_LEN
    started = bulk.start(store, "cancel", {"queue": "q"}, "operator:ann", 0, operation_id=key)
    assert started.id == key
    found = store.get_operation(key)
    assert found is not None and found.id == key
    with pytest.raises(ValidationError) as raised:
        bulk.start(store, "cancel", {"queue": "q"}, "operator:ann", 0, operation_id=key + "k")
    assert raised.value.field == "operation_id"


def test_a_default_unique_key_of_the_longest_name_is_stored(store: JobStore) -> None:
    spec = JobSpec("n" * MAX_NAME_LEN, {"day": 1}, unique_for=60)
    key = unique_key_of(spec)
    assert key is not None and len(key) == MAX_NAME_LEN + 65
    first, created = store.enqueue_idempotent(spec)
    again, created_again = store.enqueue_idempotent(spec)
    assert (created, created_again, again.id) == (True, False, first.id)


def test_queue_names_of_pause_and_resume_are_checked_like_enqueue(store: JobStore) -> None:
    longest = "q" * MAX_QUEUE_LEN
    assert store.pause_queue(longest, actor="operator:ann").paused
    assert not store.resume_queue(longest, actor="operator:ann").paused
    for bad in ("q" * (MAX_QUEUE_LEN + 1), "", "  ", "a\x00b"):
        for change in (store.pause_queue, store.resume_queue):
            with pytest.raises(ValidationError) as raised:
                change(bad, actor="operator:ann")
            assert raised.value.field == "queue"
    assert [s.name for s in store.queue_states()] == [longest]


def test_the_longest_actor_is_recorded_and_a_longer_one_refused(store: JobStore) -> None:
    job = store.enqueue("t")
    assert store.cancel(job.id, actor=LONG_ACTOR).status.name == "Canceled"
    store.pause_queue("mail", actor=LONG_ACTOR)
    store.record_audit(EventKind.BULK_STARTED, LONG_ACTOR, "cancel of 1 job")
    assert {e.actor for e in store.audit()} == {LONG_ACTOR}
    too_long = LONG_ACTOR + "a"
    other = store.enqueue("t")
    attempts = [
        lambda: store.cancel(other.id, actor=too_long),
        lambda: store.requeue(job.id, actor=too_long),
        lambda: store.delete(job.id, actor=too_long),
        lambda: store.pause_queue("mail", actor=too_long),
        lambda: store.record_audit(EventKind.BULK_STARTED, too_long, "x"),
        lambda: bulk.start(store, "cancel", {}, too_long, 0),
    ]
    for attempt in attempts:
        with pytest.raises(ValidationError) as raised:
            attempt()
        assert raised.value.field == "actor"
    assert store.get(other.id).status.name == "Queued" and store.get(job.id).status.name == "Canceled"


def test_a_recovery_run_triggered_by_an_operator_of_the_longest_name_is_recorded(store: JobStore) -> None:
    trigger = "operator:" + "b" * 100 + "#1f2e3d4c"
    now = datetime.now(UTC)
    run = RecoveryRun(str(uuid.uuid4()), now, now, trigger, trigger, 0, 0, 1.0)
    store.record_recovery_run(run)
    assert store.recovery_runs(1)[0].trigger == trigger


def test_a_worker_command_by_the_longest_actor(store: JobStore) -> None:
    now = datetime.now(UTC)
    store.worker_heartbeat(WorkerInfo("w-1", "host", 1, ["default"], 1, [], now, now))
    assert store.command_worker("w-1", "quiet", actor=LONG_ACTOR).command_by == LONG_ACTOR
    with pytest.raises(ValidationError):
        store.command_worker("w-1", "stop", actor=LONG_ACTOR + "a")
    assert store.workers()[0].command == "quiet"
