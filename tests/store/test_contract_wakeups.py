"""Wake-ups of idle workers, on every store that has them (Redis wake-up
lists, PostgreSQL LISTEN; SQLite has none): a notice for each enqueue of a
ready job, the one-round-trip claim of the job a notice names
(``claim_notified``: the notice of a single ready job names it, on
Redis its ready member, on PostgreSQL its id), and on Redis the hand-over of each notice to one
waiting worker and the bound on what waits unread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from store.base import JobStore, Notice, Wakeups
from store.flow_rules import QueueLimits
from store.models import JobSpec
from tests.backends import REDIS_BACKENDS, StoreHandle, redis_engine

#: Seconds a wait may block in these tests (each returns as soon as a notice is there).
WAIT_S = 5.0


@contextmanager
def listening(handle: StoreHandle, queues: list[str]) -> Iterator[Wakeups]:
    """A listener of ``queues``, connected and listening, closed on exit."""
    wakeups = handle.store.wakeups(queues)
    if wakeups is None:
        pytest.skip(f"{handle.backend} has no wake-up channel (workers poll)")
    try:
        wakeups.wait(0.05)  # a PostgreSQL LISTEN is in place once a wait returns
        yield wakeups
    finally:
        wakeups.close()


def first_notice(wakeups, timeout_s: float = WAIT_S) -> Notice | None:
    """The first notice for the listened queues within ``timeout_s`` (a wait
    may end early without one, e.g. after a reconnect: wait again until the
    deadline)."""
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        notice = wakeups.wait(left)
        if notice is not None:
            return notice
    return None


def test_an_enqueue_of_one_ready_job_notifies_its_queue(handle: StoreHandle) -> None:
    store = handle.store
    with listening(handle, ["a", "b"]) as wakeups:
        store.enqueue("noop", queue="elsewhere")
        store.enqueue("noop", queue="b", delay_s=60)  # not ready: no notice
        job = store.enqueue("noop", queue="b")
        notice = first_notice(wakeups)
        assert notice is not None and notice.queue == "b"
        assert notice.job is not None  # every store with notices names a single ready job
        jobs = store.claim_notified("w-1", notice)
        assert [j.id for j in jobs] == [job.id]
        assert jobs[0] == store.get(job.id)
        assert jobs[0].status.name == "InProgress" and jobs[0].worker_id == "w-1"
        assert jobs[0].lease_token == 1
        assert store.claim_notified("w-2", notice) == []  # taken: nobody else leases it
        assert store.get(job.id).worker_id == "w-1"


def test_a_notice_in_a_limited_queue_leases_what_its_limits_admit(handle: StoreHandle) -> None:
    """A queue with limits: the notified claim leases as ``claim`` would, the
    job its limits admit (a worker runs no other claim for the notice, so a
    store that left limited queues to the claim loop kept the job waiting
    for the idle poll)."""
    store = handle.store
    store.set_queue_limits("lim", QueueLimits(concurrency=1))
    with listening(handle, ["lim"]) as wakeups:
        job = store.enqueue("noop", queue="lim")
        notice = first_notice(wakeups)
        assert notice is not None and notice.job is not None
        assert [j.id for j in store.claim_notified("w-1", notice)] == [job.id]
        second = store.enqueue("noop", queue="lim")
        notice = first_notice(wakeups)
        assert notice is not None
        assert store.claim_notified("w-2", notice) == []  # concurrency 1, held by w-1
        assert store.get(second.id).status.name == "Queued"


def test_a_notice_for_another_queue_does_not_end_the_wait(handle: StoreHandle) -> None:
    """One wait returns the listened queue's notice even when notices for
    other queues come first (PostgreSQL delivers every queue's to every
    listener; before 2026-11-25 its wait returned None on the first)."""
    store = handle.store
    with listening(handle, ["a"]) as wakeups:
        store.enqueue("noop", queue="b")  # waiting when the wait starts
        later = threading.Timer(0.5, lambda: store.enqueue("noop", queue="a"))
        later.start()
        try:
            notice = wakeups.wait(WAIT_S)
        finally:
            later.join()
        assert notice is not None and notice.queue == "a"


def test_a_notified_claim_finds_nothing_once_a_batch_claim_took_the_job(handle: StoreHandle) -> None:
    store = handle.store
    with listening(handle, ["default"]) as wakeups:
        job = store.enqueue("noop")
        notice = first_notice(wakeups)
        assert notice is not None
        assert [j.id for j in store.claim("w-batch", ["default"], 10)] == [job.id]
        assert store.claim_notified("w-1", notice) == []
        assert store.get(job.id).worker_id == "w-batch"


def test_a_notified_claim_leaves_a_paused_queue_alone(handle: StoreHandle) -> None:
    store = handle.store
    with listening(handle, ["default"]) as wakeups:
        job = store.enqueue("noop")
        notice = first_notice(wakeups)
        assert notice is not None
        store.pause_queue("default", actor="operator:t")
        assert store.claim_notified("w-1", notice) == []
        assert store.get(job.id).status.name == "Queued"
        store.resume_queue("default", actor="operator:t")
        if notice.job is not None:
            assert [j.id for j in store.claim_notified("w-1", notice)] == [job.id]


def test_a_bulk_enqueue_notifies_without_naming_a_job(handle: StoreHandle) -> None:
    store = handle.store
    with listening(handle, ["default"]) as wakeups:
        store.enqueue_many([JobSpec("noop"), JobSpec("noop")])
        notice = first_notice(wakeups)
        assert notice == Notice("default", None)
        assert store.claim_notified("w-1", notice) == []


# ------------------------------------------------------------ Redis only


def redis_only(handle: StoreHandle) -> JobStore:
    if handle.backend not in REDIS_BACKENDS:
        pytest.skip("Redis hands each notice to one worker; PostgreSQL NOTIFY reaches every listener")
    return handle.store


def test_redis_hands_each_notice_to_one_waiting_worker(handle: StoreHandle) -> None:
    store = redis_only(handle)
    got: list[Notice | None] = []
    listeners = [store.wakeups(["default"]) for _ in range(2)]
    started = threading.Barrier(3)

    def listen(w) -> None:
        started.wait()
        got.append(w.wait(1.0))

    threads = [threading.Thread(target=listen, args=(w,)) for w in listeners]
    for t in threads:
        t.start()
    started.wait()
    job = store.enqueue("noop")
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    named = [n for n in got if n is not None]
    assert len(named) == 1 and rank_id(named[0]) == job.id  # the other one timed out empty


def test_redis_a_notice_given_back_reaches_another_worker(handle: StoreHandle) -> None:
    store = redis_only(handle)
    first, second = store.wakeups(["default"]), store.wakeups(["default"])
    job = store.enqueue("noop")
    notice = first.wait(1.0)
    assert notice is not None and rank_id(notice) == job.id
    first.give_back(notice)
    assert second.wait(1.0) == notice
    assert second.wait(0.05) is None  # nothing left


def test_redis_notices_nobody_reads_are_bounded_and_coalesce(handle: StoreHandle) -> None:
    from store.redis.wakeups import WAKEUP_KEPT

    store = redis_only(handle)
    for _ in range(WAKEUP_KEPT + 10):
        store.enqueue("noop")
    assert (
        WAKEUP_KEPT // 2
        <= (shard := redis_engine(store, queue="default"))._client.llen(shard.keys.wakeup("default"))
        <= WAKEUP_KEPT
    )
    wakeups = store.wakeups(["default"])
    # Everything waiting comes as one notice naming no single job: claim as usual.
    assert wakeups.wait(1.0) == Notice("default", None)
    assert wakeups.wait(0.05) is None


def rank_id(notice: Notice) -> str:
    from store.redis.keys import rank_job_id

    assert notice.job is not None
    return rank_job_id(notice.job)
