"""Contract: the edges of flow control on every store. A limited queue's
running jobs are counted whichever way they leave InProgress and whenever the
limit was set; a notice never claims past a limit; a deleted parent cancels
its waiting children; a batch's jobs and a chain's order are listed."""

from __future__ import annotations

from store.base import JobStore
from store.flow_rules import QueueLimits
from store.lifecycle import JobStatus
from store.models import JobSpec
from tests.store.helpers import ERROR, expire_leases

S = JobStatus


def test_every_way_out_of_in_progress_frees_a_slot(store: JobStore) -> None:
    store.set_queue_limits("q", QueueLimits(concurrency=1))
    store.enqueue_many([JobSpec("t", {"i": i}, queue="q", max_retries=5) for i in range(6)])
    exits = [
        lambda j: store.complete(j.id, j.lease_token, None),
        lambda j: store.fail(j.id, j.lease_token, ERROR),
        lambda j: store.release(j.id, j.lease_token, "w"),
        lambda j: store.cancel(j.id, actor="operator:ann"),
    ]
    for leave in exits:
        [job] = store.claim("w", ["q"], 5)
        assert store.claim("w", ["q"], 5) == []
        assert store.limit_usage("q").running == 1
        leave(job)
        assert store.limit_usage("q").running == 0
    [job] = store.claim("w", ["q"], 5)
    expire_leases(store)
    store.recover_expired()
    assert store.limit_usage("q").running == 0
    assert len(store.claim("w", ["q"], 5)) == 1


def test_a_limit_set_while_jobs_run_counts_them(store: JobStore) -> None:
    store.enqueue_many([JobSpec("t", {"i": i}, queue="q", limit_key="k") for i in range(5)])
    running = store.claim("w", ["q"], 2)
    store.set_queue_limits("q", QueueLimits(concurrency=3, per_key_concurrency=2))
    usage = store.limit_usage("q")
    assert (usage.running, usage.running_by_key) == (2, {"k": 2})
    assert store.claim("w", ["q"], 5) == []  # the key's 2 slots are taken
    store.complete(running[0].id, running[0].lease_token, None)
    assert len(store.claim("w", ["q"], 5)) == 1
    store.set_queue_limits("q", QueueLimits())
    assert len(store.claim("w", ["q"], 5)) == 2


def test_a_notice_never_claims_past_a_limit(store: JobStore) -> None:
    from store.notices import Notice

    store.set_queue_limits("q", QueueLimits(concurrency=1))
    store.enqueue("t", None, queue="q")
    store.claim("w", ["q"], 1)
    notice = Notice("q")
    wakeups = store.wakeups(["q"])
    if wakeups is not None:  # a store with notices: the one naming the second job
        try:
            while wakeups.wait(0.2) is not None:
                pass
            store.enqueue("t", None, queue="q")
            notice = wakeups.wait(2.0) or notice
        finally:
            wakeups.close()
    else:
        store.enqueue("t", None, queue="q")
    assert store.claim_notified("w-2", notice) == []
    assert store.limit_usage("q").running == 1


def test_a_deleted_parent_cancels_its_waiting_children(store: JobStore) -> None:
    parent = store.enqueue("p", None, delay_s=3600)
    child = store.enqueue("c", None, depends_on=[parent.id])
    runs_anyway = store.enqueue("c", None, depends_on=[parent.id], on_parent_failure="run")
    store.delete(parent.id, actor="operator:ann")
    assert store.get(child.id).status is S.Canceled
    assert store.get(runs_anyway.id).status is S.Queued
    assert store.parents(child.id) == []


def test_batch_jobs_are_listed_in_order(store: JobStore) -> None:
    batch = store.create_batch([JobSpec("t", {"n": n}, queue="b") for n in range(5)], kind="chain")
    assert [j.payload["n"] for j in store.batch_jobs(batch.id)] == [0, 1, 2, 3, 4]
    assert [j.payload["n"] for j in store.batch_jobs(batch.id, limit=2)] == [0, 1]
    assert batch.callback_job_id is None and batch.counts == {"Queued": 1, "Scheduled": 4}
