"""Contract: what the stores once did differently, each pinned on every store
(the stateful comparison with the reference model, tests/store/test_contract_model.py,
found or confirms them): a Completed job keeps no error; requeue and retry-now
never make a job run before an unfinished parent; a batch lists its job ids; a
busy limit key never starves another key of its queue at any depth; a
start made under a queue rate counts in a per-key rate set after it."""

from __future__ import annotations

import pytest
from sqlalchemy import event

from store.base import JobStore
from store.contract_flow import BATCH_IDS_SHOWN
from store.errors import InvalidTransition, ParentUnfinished, ValidationError
from store.flow_rules import QueueLimits, Rate
from store.lifecycle import JobStatus
from store.models import JobSpec
from tests.backends import StoreHandle
from tests.store.helpers import ERROR

S = JobStatus


def test_a_completed_job_keeps_no_error_and_its_attempts_keep_the_history(store: JobStore) -> None:
    job = store.enqueue("t", None, queue="e", max_retries=2)
    [first] = store.claim("w", ["e"], 1)
    store.fail(first.id, first.lease_token, ERROR)
    assert store.get(job.id).error["type"] == "RuntimeError"
    store.clock_offset_s += 3600
    [second] = store.claim("w", ["e"], 1)
    done = store.complete(second.id, second.lease_token, {"ok": True})
    assert done.error is None and store.get(job.id).error is None
    assert [a.error["type"] for a in store.attempts(job.id)] == ["RuntimeError"]


def test_retry_now_of_a_waiting_child_is_refused_naming_its_parent(store: JobStore) -> None:
    parent = store.enqueue("p", None, queue="d")
    child = store.enqueue("c", None, queue="d", depends_on=[parent.id])
    [running] = store.claim("w", ["d"], 10)
    assert running.id == parent.id
    for act in (store.retry_now, store.requeue):
        with pytest.raises(ParentUnfinished) as refused:
            act(child.id)
        assert refused.value.parent_id == parent.id and "InProgress" in str(refused.value)
        assert isinstance(refused.value, InvalidTransition)  # a 409 at the API
    assert store.get(child.id).status is S.Scheduled
    assert store.claim("w", ["d"], 10) == []  # the child never runs before its parent
    store.complete(parent.id, running.lease_token, None)
    assert store.get(child.id).status is S.Queued
    assert [j.id for j in store.claim("w", ["d"], 10)] == [child.id]


def test_requeue_of_a_canceled_child_waits_until_its_parent_has_finished(store: JobStore) -> None:
    parent = store.enqueue("p", None, queue="d")
    child = store.enqueue("c", None, queue="d", depends_on=[parent.id])
    store.cancel(child.id)
    with pytest.raises(ParentUnfinished):
        store.requeue(child.id)
    assert store.get(child.id).status is S.Canceled
    [running] = store.claim("w", ["d"], 10)
    store.complete(parent.id, running.lease_token, None)
    assert store.requeue(child.id).status is S.Queued
    assert [j.id for j in store.claim("w", ["d"], 10)] == [child.id]


def test_a_job_whose_parent_was_requeued_waits_for_its_rerun(store: JobStore) -> None:
    parent = store.enqueue("p", None, queue="d", max_retries=0)
    child = store.enqueue("c", None, queue="d", depends_on=[parent.id], on_parent_failure="run")
    [p] = store.claim("w", ["d"], 10)
    store.fail(p.id, p.lease_token, ERROR)
    [c] = store.claim("w", ["d"], 10)
    assert c.id == child.id
    store.fail(c.id, c.lease_token, ERROR, permanent=True)
    store.requeue(parent.id)
    with pytest.raises(ParentUnfinished) as refused:
        store.retry_now(child.id)
    assert "Queued" in str(refused.value)


@pytest.mark.parametrize("flow", [{"limit_key": "x"}, {"on_parent_failure": "run"}])
def test_a_unique_job_with_flow_options_is_refused_on_every_store(store: JobStore, flow: dict) -> None:
    """Redis refused it; SQL stores enqueued a second job despite the key."""
    store.enqueue_idempotent(JobSpec("t", None, queue="u", unique_key="K", unique_for=30))
    for spec in (
        JobSpec("t", None, queue="u", unique_key="K", unique_for=30, **flow),
        JobSpec("t", None, queue="u", unique_key="K", **flow),
    ):
        with pytest.raises(ValidationError) as refused:
            store.enqueue_idempotent(spec)
        assert refused.value.field in ("unique_for", "unique_key")
    assert store.counts().by_queue["u"] == {"Queued": 1}


def test_a_batch_lists_its_first_job_ids_in_enqueue_order(store: JobStore) -> None:
    specs = [JobSpec("t", {"i": i}, queue="b") for i in range(BATCH_IDS_SHOWN + 5)]
    batch = store.create_batch(specs, JobSpec("cb", None, queue="b"))
    ids = [j.id for j in store.batch_jobs(batch.id, limit=BATCH_IDS_SHOWN + 5)]
    got = store.get_batch(batch.id)
    assert len(ids) == BATCH_IDS_SHOWN + 5
    assert got.job_ids == ids[:BATCH_IDS_SHOWN]
    assert got.to_json()["job_ids"] == ids[:BATCH_IDS_SHOWN]
    assert batch.callback_job_id not in got.job_ids


def test_a_busy_limit_key_never_starves_another_key_at_any_depth(store: JobStore) -> None:
    """A claim reads a bounded part of a deep ready set on Redis, going on
    where the last one stopped: every job is reached within
    ceil(depth / 1,000) + 1 claims (SQL stores find it in the first)."""
    store.set_queue_limits("k", QueueLimits(per_key_concurrency=1))
    store.enqueue_many([JobSpec("t", {"i": i}, queue="k", limit_key="hot") for i in range(1100)])
    cold = store.enqueue("t", {"cold": True}, queue="k", limit_key="cold")
    claimed = [j for _ in range(3) for j in store.claim("w", ["k"], 4)]
    assert sorted(j.limit_key for j in claimed) == ["cold", "hot"]
    assert cold.id in {j.id for j in claimed}
    waiting = store.list_jobs(status=S.Queued, queue="k", limit=1).items[0]
    kind, why = store.limit_hold(waiting)
    assert kind == "per_key_concurrency" and "'hot'" in why


def test_a_start_under_a_queue_rate_counts_in_a_per_key_rate_set_later(store: JobStore) -> None:
    """Found by the model on Redis: starts were kept per window, so a key's
    start made while only the queue's rate was set was not counted once a
    per-key rate replaced it (SQL keeps one row a start for both windows)."""
    store.set_queue_limits("r", QueueLimits(rate=Rate(3, 20.0)))
    store.enqueue("t", None, queue="r", limit_key="x")
    [job] = store.claim("w", ["r"], 1)
    limits = QueueLimits(per_key_rate=Rate(2, 20.0))
    store.set_queue_limits("r", limits)
    assert store.limit_usage("r").in_use(limits) == {"per_key_rate": 1}
    assert job.limit_key == "x"


def test_sql_cancels_a_big_batch_in_short_transactions(handle: StoreHandle) -> None:
    """SQLite has one writer: a 1,200-job batch is canceled in transactions
    of at most 500 jobs, so concurrent enqueues get the lock in between."""
    if handle.backend not in ("sqlite", "postgresql"):
        pytest.skip("SQL stores only")
    store = handle.store
    batch = store.create_batch([JobSpec("t", {"i": i}, queue="b") for i in range(1200)])
    engine = store.write_engine  # type: ignore[attr-defined]
    commits: list[int] = []
    listener = lambda conn: commits.append(1)  # noqa: E731
    event.listen(engine, "commit", listener)
    try:
        after = store.cancel_batch(batch.id)
    finally:
        event.remove(engine, "commit", listener)
    assert after.counts == {"Canceled": 1200}
    assert len(commits) >= 3
