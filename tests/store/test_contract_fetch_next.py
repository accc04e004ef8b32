"""Contract: an ack that claims the next jobs (``complete_and_claim``,
BullMQ's fetch-next), with the runs' last progress riding the acks. A store
with ``fetches_next`` makes it one atomic call; the others make the calls one
after another, with the same outcome."""

from __future__ import annotations

import pytest

from store.base import JobStore
from store.errors import LeaseLost, ValidationError
from store.lifecycle import JobStatus
from tests.store.helpers import expire_leases

S = JobStatus


def test_acks_then_claims_the_next_jobs_fenced(store: JobStore) -> None:
    first = [store.enqueue("t", {"i": i}) for i in range(2)]
    running = store.claim("w", ["default"], 2)
    waiting = [store.enqueue("t", {"i": i}) for i in range(3)]
    acks = [(j.id, j.lease_token, {"n": n}) for n, j in enumerate(running)]
    outcomes, jobs = store.complete_and_claim(acks, "w", [["default"]], 2, lease_ttl_s=30)
    assert outcomes == [None, None]
    for n, job in enumerate(first):
        done = store.get(job.id)
        assert (done.status, done.result, done.lease_token) == (S.Completed, {"n": n}, 1)
    assert [j.id for j in jobs] == [w.id for w in waiting[:2]]  # claim order, as claim takes them
    for job in jobs:
        assert (job.status, job.worker_id, job.lease_token) == (S.InProgress, "w", 1)
        assert store.get(job.id) == job
    assert store.get(waiting[2].id).status is S.Queued
    assert store.counts().by_status["InProgress"] == 2


def test_a_refused_ack_still_claims_and_writes_nothing(store: JobStore) -> None:
    store.enqueue("t")
    [old] = store.claim("w-old", ["default"], 1, lease_ttl_s=1)
    expire_leases(store)
    store.recover_expired()  # a retry, after its backoff
    store.clock_offset_s += 3600
    [new] = store.claim("w-new", ["default"], 1)
    nxt = store.enqueue("t")
    outcomes, jobs = store.complete_and_claim(
        [(old.id, old.lease_token, "stale")],
        "w-old",
        [["default"]],
        1,
        progress=[(old.id, old.lease_token, 0.5, "x")],
    )
    [lost] = outcomes
    assert isinstance(lost, LeaseLost) and lost.current_token == new.lease_token
    current = store.get(old.id)
    assert (current.status, current.result, current.progress) == (S.InProgress, None, None)
    assert [j.id for j in jobs] == [nxt.id]


def test_progress_rides_the_ack(store: JobStore) -> None:
    store.enqueue("t")
    [run] = store.claim("w", ["default"], 1)
    outcomes, jobs = store.complete_and_claim(
        [(run.id, run.lease_token, None)],
        "w",
        [["default"]],
        0,
        progress=[(run.id, run.lease_token, 1.0, "done")],
    )
    assert (outcomes, jobs) == ([None], [])
    done = store.get(run.id)
    assert done.status is S.Completed
    assert (done.progress["fraction"], done.progress["message"]) == (1.0, "done")
    with pytest.raises(ValidationError):  # a report of a run not being acked
        store.complete_and_claim([], "w", [["default"]], 0, progress=[(run.id, 9, 0.5, None)])


def test_the_second_queue_group_only_when_the_first_gives_none(store: JobStore) -> None:
    other = store.enqueue("t", queue="other")
    _, jobs = store.complete_and_claim([], "w", [["turn"], ["other", "more"]], 3)
    assert [j.id for j in jobs] == [other.id]  # "turn" is empty: the others
    mine = store.enqueue("t", queue="turn")
    later = store.enqueue("t", queue="other")
    _, jobs = store.complete_and_claim([], "w", [["turn"], ["other"]], 3)
    assert [j.id for j in jobs] == [mine.id]  # the turn's queue gave one: the others wait
    assert store.get(later.id).status is S.Queued


def test_paused_queues_and_scheduled_jobs_as_the_claim_has_them(store: JobStore) -> None:
    store.pause_queue("held", actor="operator:ann")
    store.enqueue("t", queue="held")
    due = store.enqueue("t", delay_s=5)
    _, jobs = store.complete_and_claim([], "w", [["held", "default"]], 5)
    assert jobs == []
    store.clock_offset_s += 6
    _, jobs = store.complete_and_claim([], "w", [["held", "default"]], 5)
    assert [j.id for j in jobs] == [due.id]
    with pytest.raises(ValidationError):
        store.complete_and_claim([], "w", [], 1)
