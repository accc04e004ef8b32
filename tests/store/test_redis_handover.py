"""The hand-over of a new job to an idle worker (Redis; store/redis/wakeups.py):
a worker waiting on its queues is registered (lua/idle.lua), and an enqueue
that finds a live registration leases the job to it in the same call and
pushes the claim's reply on the worker's own list, which the worker's wait
pops. Each registration takes one job; pause and limits decide as in any
claim; a job its worker never popped comes back without an attempt spent
(recovery, or ``close``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from store.flow_rules import QueueLimits
from store.lifecycle import JobStatus
from store.models import JobSpec
from store.redis.store import RedisStore
from store.redis.wakeups import REGISTRATION_S, RedisWakeups
from tests.conftest import handle_fixture
from tests.store.helpers import expire_leases

handle = handle_fixture(["redis"])

S = JobStatus
TTL_S = 30.0


@contextmanager
def idle_worker(store: RedisStore, worker_id: str, queues: list[str] | None = None) -> Iterator[RedisWakeups]:
    """A worker's listener, registered for hand-over on ``queues`` (its first
    wait registers; nothing is waiting yet, so it returns None at once)."""
    wakeups = store.wakeups(queues or ["default"], worker_id, TTL_S)
    try:
        assert wakeups.wait(0.01) is None
        yield wakeups
    finally:
        wakeups.close()


def hand_list(store: RedisStore, worker_id: str) -> int:
    return store._client.llen(store.keys.hand(worker_id))


def wakeup_entries(store: RedisStore, queue: str = "default") -> list[str]:
    return store._client.lrange(store.keys.wakeup(queue), 0, -1)


def test_an_idle_worker_is_handed_the_job_leased_as_get_reads_it(store: RedisStore) -> None:
    with idle_worker(store, "w-1") as wakeups:
        job = store.enqueue("noop", {"n": 1})
        stored = store.get(job.id)
        assert (stored.status, stored.worker_id, stored.lease_token) == (S.InProgress, "w-1", 1)
        assert wakeup_entries(store) == []  # handed over: no other worker is woken
        notice = wakeups.wait(5.0)
        assert notice is not None and notice.queue == "default"
        [handed] = notice.leased
        assert handed == store.get(job.id)
        assert handed.lease_expires_at.timestamp() == pytest.approx(handed.started_at.timestamp() + TTL_S)
        store.complete(handed.id, handed.lease_token, {"ok": True}, worker_id="w-1")
        assert store.get(job.id).status is S.Completed


def test_a_registration_takes_one_job_and_the_next_wait_registers_again(store: RedisStore) -> None:
    with idle_worker(store, "w-1") as wakeups:
        first = store.enqueue("noop")
        second = store.enqueue("noop")
        assert store.get(first.id).status is S.InProgress
        assert store.get(second.id).status is S.Queued
        assert wakeup_entries(store) != []  # the job left waits for a claim, and wakes a worker
        assert [j.id for j in wakeups.wait(5.0).leased] == [first.id]
        assert wakeups.wait(5.0).leased == ()  # the wake-up entry of the second: no lease in it
        third = store.enqueue("noop")
        assert store.get(third.id).worker_id == "w-1"


def test_one_bulk_enqueue_hands_one_job_to_each_idle_worker(store: RedisStore) -> None:
    with idle_worker(store, "w-1") as one, idle_worker(store, "w-2") as two:
        jobs = store.enqueue_many([JobSpec("noop", {"i": i}) for i in range(3)])
        statuses = [store.get(j.id) for j in jobs]
        assert [j.status for j in statuses] == [S.InProgress, S.InProgress, S.Queued]
        assert {statuses[0].worker_id, statuses[1].worker_id} == {"w-1", "w-2"}
        assert wakeup_entries(store) == ["*"]
        got = {one.wait(5.0).leased[0].id, two.wait(5.0).leased[0].id}
        assert got == {jobs[0].id, jobs[1].id}


def test_an_expired_or_withdrawn_registration_is_not_used(store: RedisStore) -> None:
    with idle_worker(store, "w-1") as wakeups:
        store.clock_offset_s += REGISTRATION_S + 1  # the worker died while idle
        late = store.enqueue("noop")
        assert store.get(late.id).status is S.Queued
    with idle_worker(store, "w-2", ["other"]) as wakeups:
        wakeups.withdraw()  # its slots filled
        job = store.enqueue("noop", queue="other")
        assert store.get(job.id).status is S.Queued


def test_a_delayed_job_a_paused_queue_and_a_limited_one_are_not_handed(store: RedisStore) -> None:
    with idle_worker(store, "w-1", ["default", "lim"]) as wakeups:
        delayed = store.enqueue("noop", delay_s=60)
        store.pause_queue("default", actor="operator:ann")
        paused = store.enqueue("noop")
        store.set_queue_limits("lim", QueueLimits(concurrency=2))  # room, but its claim admits
        limited = store.enqueue("noop", queue="lim")
        assert [store.get(j.id).status for j in (delayed, paused, limited)] == [
            S.Scheduled,
            S.Queued,
            S.Queued,
        ]
        assert wakeup_entries(store, "lim") != []  # the limited queue's job wakes a worker instead
        store.resume_queue("default", actor="operator:ann")
        job = store.enqueue("noop")  # the registration was put back each time
        assert store.get(job.id).worker_id == "w-1"
        assert [j.id for j in wakeups.wait(5.0).leased] == [job.id]


def test_the_registration_renewed_last_is_handed_the_job(store: RedisStore) -> None:
    with idle_worker(store, "w-old") as old:
        store.clock_offset_s += 1.0  # w-new registers later: its registration ends later
        with idle_worker(store, "w-new"):
            job = store.enqueue("noop")
            assert store.get(job.id).worker_id == "w-new"
        assert old.wait(0.01) is None


def test_a_worker_that_withdraws_releases_what_was_handed_before(store: RedisStore) -> None:
    with idle_worker(store, "w-1") as wakeups:
        job = store.enqueue("noop")
        assert store.get(job.id).worker_id == "w-1"
        wakeups.withdraw()  # its slots filled before its next pop
        back = store.get(job.id)
        assert (back.status, back.retry_count, back.worker_id) == (S.Scheduled, 0, None)
        assert hand_list(store, "w-1") == 0
        later = store.enqueue("noop")
        assert store.get(later.id).status is S.Queued


def test_a_release_for_a_hand_over_entry_no_longer_there_writes_nothing(store: RedisStore) -> None:
    with idle_worker(store, "w-1") as wakeups:
        job = store.enqueue("noop")
        [handed] = wakeups.wait(5.0).leased  # the worker popped it: recovery must not release it
        args = store._args("release", job.id, handed.lease_token, "recovery", "w-1", '[["id","x"]]')
        assert store._eval(store._lua.release, store._route, args) == [-2]
        assert store.get(job.id) == handed


def test_a_handed_job_never_popped_comes_back_without_an_attempt(store: RedisStore) -> None:
    ran = store.wakeups(["default"], "w-1", TTL_S)
    ran.wait(0.01)
    popped = store.enqueue("noop")
    assert [j.id for j in ran.wait(5.0).leased] == [popped.id]  # then w-1 dies mid-run
    dead = store.wakeups(["default"], "w-2", TTL_S)
    dead.wait(0.01)
    lost = store.enqueue("noop")  # w-2 dies before its next wait: never closed
    assert (store.get(lost.id).worker_id, hand_list(store, "w-2")) == ("w-2", 1)
    assert 0 < store._client.pttl(store.keys.hand("w-2")) <= 86_400_000  # not kept for ever

    expire_leases(store, TTL_S + 1)
    preview = {r.job_id: r for r in store.preview_recovery().recovered}
    assert (preview[lost.id].retry_count, preview[popped.id].retry_count) == (0, 1)
    report = {r.job_id: r for r in store.recover_expired().recovered}
    assert (report[lost.id].retry_count, report[popped.id].retry_count) == (0, 1)
    back = store.get(lost.id)
    assert (back.status, back.retry_count, back.lease_expirations, back.worker_id) == (
        S.Scheduled,
        0,
        0,
        None,
    )
    assert hand_list(store, "w-2") == 0
    assert [e.kind for e in store.events(lost.id)][-1] == "released"
    # the job w-1 popped and ran past its lease spent an attempt, as any expired lease does
    assert store.get(popped.id).lease_expirations == 1
    assert [j.id for j in store.claim("w-3", ["default"], 2, TTL_S)] == [lost.id]


def test_a_stopping_worker_releases_what_was_handed_to_it(store: RedisStore) -> None:
    wakeups = store.wakeups(["default"], "w-1", TTL_S)
    wakeups.wait(0.01)
    job = store.enqueue("noop")
    assert store.get(job.id).status is S.InProgress
    wakeups.close()
    back = store.get(job.id)
    assert (back.status, back.retry_count, back.worker_id) == (S.Scheduled, 0, None)
    assert hand_list(store, "w-1") == 0
    later = store.enqueue("noop")
    assert store.get(later.id).status is S.Queued  # and it is registered no more


def test_a_full_worker_gives_a_handed_job_back(store: RedisStore) -> None:
    with idle_worker(store, "w-1") as wakeups:
        job = store.enqueue("noop")
        notice = wakeups.wait(5.0)
        wakeups.give_back(notice)
        back = store.get(job.id)
        assert (back.status, back.retry_count) == (S.Scheduled, 0)
        assert [j.id for j in store.claim("w-2", ["default"], 1, TTL_S)] == [job.id]
