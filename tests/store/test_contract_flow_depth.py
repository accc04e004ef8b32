"""Contract: a claim of a queue with per-key limits finds an admissible job at
any depth of the queue, on every store: one busy limit key with more waiting
jobs than a claim reads never hides the jobs of another key (docs/architecture.md,
Flow control), whenever the limit was set and whichever way jobs came and went."""

from __future__ import annotations

from store.base import JobStore
from store.flow_rules import QueueLimits, Rate
from store.lifecycle import JobStatus
from store.models import JobSpec

S = JobStatus
#: More waiting jobs of one key than a claim reads at once on any store.
DEEP = 1100


def _hot_then(store: JobStore, *tail: JobSpec) -> list:
    hot = store.enqueue_many([JobSpec("t", {"i": i}, queue="q", limit_key="hot") for i in range(DEEP)])
    return [*hot, *store.enqueue_many(list(tail))]


def test_one_busy_key_never_hides_another_key_at_any_depth(store: JobStore) -> None:
    store.set_queue_limits("q", QueueLimits(per_key_concurrency=1))
    jobs = _hot_then(store, JobSpec("t", None, queue="q", limit_key="cold"))
    claimed = store.claim("w", ["q"], 4)
    assert [j.id for j in claimed] == [jobs[0].id, jobs[-1].id]
    assert store.claim("w", ["q"], 4) == []
    store.complete(claimed[1].id, claimed[1].lease_token, None)
    store.complete(claimed[0].id, claimed[0].lease_token, None)
    assert [j.id for j in store.claim("w", ["q"], 4)] == [jobs[1].id]


def test_a_limit_set_after_the_jobs_waited_finds_them_too(store: JobStore) -> None:
    """Jobs without a limit key are found at any depth as well."""
    cold = [JobSpec("t", None, queue="q", limit_key="cold") for _ in range(2)]
    jobs = _hot_then(store, *cold, JobSpec("t", None, queue="q"))
    store.set_queue_limits("q", QueueLimits(per_key_rate=Rate(1, 60.0)))
    claimed = store.claim("w", ["q"], 4)
    assert [j.id for j in claimed] == [jobs[0].id, jobs[-3].id, jobs[-1].id]
    assert store.claim("w", ["q"], 4) == []
    store.clock_offset_s += 61
    assert [j.id for j in store.claim("w", ["q"], 4)] == [jobs[1].id, jobs[-2].id]


def test_requeued_canceled_and_deleted_keyed_jobs_keep_claims_exact(store: JobStore) -> None:
    store.set_queue_limits("q", QueueLimits(per_key_concurrency=1))
    a = store.enqueue_many([JobSpec("t", {"i": i}, queue="q", limit_key="a") for i in range(4)])
    b = store.enqueue_many([JobSpec("t", {"i": i}, queue="q", limit_key="b") for i in range(2)])
    store.cancel(a[0].id, actor="operator:ann")  # the head of its key
    store.delete(b[0].id, actor="operator:ann")
    first = store.claim("w", ["q"], 4)
    assert [j.id for j in first] == [a[1].id, b[1].id]
    store.requeue(a[0].id, actor="operator:ann")  # back, due now: behind a[2] and a[3]
    store.complete(first[0].id, first[0].lease_token, None)
    store.cancel(a[2].id, actor="operator:ann")  # the key's head again
    assert [j.id for j in store.claim("w", ["q"], 4)] == [a[3].id]
    store.complete(first[1].id, first[1].lease_token, None)
    assert store.claim("w", ["q"], 4) == []  # a[3] runs: key a is full
    assert store.count_jobs(S.Queued, queue="q") == 1
