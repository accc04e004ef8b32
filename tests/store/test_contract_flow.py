"""Contract: flow control on every store. Queue limits are decided in the
claim (concurrency, per key, rate in a sliding window), set and cleared live
and audited; a job waits for its parents and the ack, failure, cancel or
recovery of the last one decides it (``store.flow_rules``); batches and chains."""

from __future__ import annotations

import threading

import pytest

from store.base import JobStore
from store.contract_flow import FlowUnsupported
from store.errors import ValidationError
from store.flow_rules import QueueLimits, Rate
from store.lifecycle import EventKind, JobStatus
from store.models import JobSpec
from tests.backends import StoreHandle
from tests.store.helpers import ERROR, expire_leases

S = JobStatus


def _run(store: JobStore, queue: str = "default", n: int = 100, worker: str = "w"):
    return store.claim(worker, [queue], n)


def _ack_all(store: JobStore, jobs) -> None:
    for j in jobs:
        store.complete(j.id, j.lease_token, {"id": j.id})


# ---------------------------------------------------------------- refusal
def test_a_store_without_flow_control_refuses_it_loudly(store: JobStore) -> None:
    """Never silently ignored: a store either decides limits and dependencies
    or refuses the options that need them."""
    if store.supports_flow:
        job = store.enqueue("t", None, limit_key="acme")
        assert store.get(job.id).limit_key == "acme"
        return
    with pytest.raises(FlowUnsupported):
        store.enqueue("t", None, limit_key="acme")
    with pytest.raises(FlowUnsupported):
        store.set_queue_limits("q", QueueLimits(concurrency=1))


# ------------------------------------------------------------------ limits
def test_limits_are_stored_listed_cleared_and_audited(store: JobStore) -> None:
    limits = QueueLimits(concurrency=3, per_key_concurrency=1, rate=Rate(10, 1.0), per_key_rate=Rate(2, 60.0))
    assert store.set_queue_limits("mail", limits, actor="operator:ann") == limits
    assert store.queue_limits() == {"mail": limits}
    entry = store.audit(1)[0]
    assert (entry.kind, entry.actor) == (EventKind.QUEUE_LIMITS_SET, "operator:ann")
    assert "mail" in (entry.message or "") and '"concurrency":3' in (entry.message or "")
    store.set_queue_limits("mail", QueueLimits(), actor="operator:ann")
    assert store.queue_limits() == {}


def test_concurrency_limit_is_decided_in_the_claim(store: JobStore) -> None:
    store.set_queue_limits("q", QueueLimits(concurrency=2))
    for i in range(5):
        store.enqueue("t", {"i": i}, queue="q")
    first = _run(store, "q", 10, "w-1")
    assert len(first) == 2
    assert _run(store, "q", 10, "w-2") == []
    assert store.counts().by_status["Queued"] == 3
    _ack_all(store, first[:1])
    again = _run(store, "q", 10, "w-2")
    assert len(again) == 1
    held = store.get(store.list_jobs(status=S.Queued, queue="q").items[0].id)
    kind, why = store.limit_hold(held)
    assert kind == "concurrency" and "2 running" in why


def test_a_worker_sees_a_limit_change_at_its_next_claim(store: JobStore) -> None:
    for i in range(4):
        store.enqueue("t", {"i": i}, queue="q")
    store.set_queue_limits("q", QueueLimits(concurrency=1))
    assert len(_run(store, "q")) == 1
    store.set_queue_limits("q", QueueLimits())
    assert len(_run(store, "q")) == 3


def test_per_key_concurrency_lets_other_keys_pass(store: JobStore) -> None:
    store.set_queue_limits("q", QueueLimits(per_key_concurrency=1))
    a1 = store.enqueue("t", None, queue="q", limit_key="a")
    store.enqueue("t", None, queue="q", limit_key="a")
    b1 = store.enqueue("t", None, queue="q", limit_key="b")
    free = store.enqueue("t", None, queue="q")
    claimed = _run(store, "q")
    assert {j.id for j in claimed} == {a1.id, b1.id, free.id}
    waiting = store.list_jobs(status=S.Queued, queue="q").items[0]
    kind, why = store.limit_hold(waiting)
    assert kind == "per_key_concurrency" and "'a'" in why


def test_enqueue_many_writes_limit_keyed_jobs_by_the_chunk_in_order(store: JobStore) -> None:
    """Jobs with a limit key are written a chunk at a time (2,100 one at a
    time took 30 s on PostgreSQL), in order, each keeping its key and the
    per-key limit deciding their claims; a chain still goes alone."""
    if not store.supports_flow:
        pytest.skip("this store has no flow control")
    store.set_queue_limits("q", QueueLimits(per_key_concurrency=1))
    specs = [JobSpec("t", i, queue="q", limit_key="hot" if i % 3 else "cold") for i in range(2100)]
    specs.insert(7, JobSpec("t", "plain", queue="q"))
    jobs = store.enqueue_many(specs)
    assert [j.payload for j in jobs] == [s.payload for s in specs]
    assert [j.limit_key for j in jobs] == [s.limit_key for s in specs]
    assert {j.status for j in jobs} == {S.Queued} and len({j.id for j in jobs}) == len(specs)
    assert store.counts().by_queue["q"]["Queued"] == len(specs)
    claimed = _run(store, "q", 10)
    assert sorted(j.limit_key or "" for j in claimed) == ["", "cold", "hot"]
    parent = store.enqueue("t", None, queue="q")
    chained = store.enqueue_many([JobSpec("t", "c", queue="q", depends_on=[parent.id], limit_key="hot")])
    assert chained[0].status is not S.Queued


def test_rate_limit_holds_starts_to_the_window_and_says_when(store: JobStore) -> None:
    store.set_queue_limits("q", QueueLimits(rate=Rate(3, 10.0)))
    for i in range(7):
        store.enqueue("t", {"i": i}, queue="q")
    assert len(_run(store, "q", 10, "w-1")) == 3
    _ack_all(store, [])
    assert _run(store, "q", 10, "w-1") == []
    wait = store.claim_retry_after("w-1")
    assert wait is not None and 9.0 < wait <= 10.0
    store.clock_offset_s += 5
    assert _run(store, "q", 10, "w-1") == []  # a sliding window: still 3 starts in the last 10 s
    store.clock_offset_s += 5.1
    assert len(_run(store, "q", 10, "w-1")) == 3


def test_per_key_rate_limit(store: JobStore) -> None:
    store.set_queue_limits("q", QueueLimits(per_key_rate=Rate(1, 60.0)))
    for key in ("a", "a", "b"):
        store.enqueue("t", None, queue="q", limit_key=key)
    assert sorted(j.limit_key for j in _run(store, "q")) == ["a", "b"]
    assert _run(store, "q") == []
    store.clock_offset_s += 61
    assert [j.limit_key for j in _run(store, "q")] == ["a"]


def test_limits_are_validated() -> None:
    from store.flow_rules import parse_limits, parse_rate_text

    with pytest.raises(ValidationError) as err:
        parse_limits({"concurrency": 0})
    assert err.value.field == "concurrency"
    with pytest.raises(ValidationError) as err:
        parse_limits({"rate": {"limit": 5, "period_s": -1}})
    assert err.value.field == "rate.period_s"
    with pytest.raises(ValidationError) as err:
        parse_limits({"speed": 1})
    assert err.value.field == "speed"
    base = QueueLimits(concurrency=3)
    assert parse_limits({"rate": {"limit": 5, "period_s": 1}}, base) == QueueLimits(3, None, Rate(5, 1.0))
    assert parse_limits({"concurrency": None}, base) == QueueLimits()
    assert parse_rate_text("rate", "20/2") == Rate(20, 2.0)


def test_concurrent_claims_never_exceed_the_limit(handle: StoreHandle) -> None:
    """Claims race from 8 threads (each its own connection): the store's
    serialisation of a limited queue's claims holds the limit."""
    store = handle.store
    store.set_queue_limits("q", QueueLimits(concurrency=3))
    store.enqueue_many([JobSpec("t", {"i": i}, queue="q") for i in range(60)])
    seen: list[int] = []
    lock = threading.Lock()
    held: dict[str, int] = {}
    stop = threading.Event()

    def worker(n: int) -> None:
        while not stop.is_set():
            jobs = store.claim(f"w-{n}", ["q"], 4)
            with lock:
                for j in jobs:
                    held[j.id] = j.lease_token
                seen.append(len(held))
            for j in jobs:
                with lock:
                    held.pop(j.id)
                store.complete(j.id, j.lease_token, None)
            if store.counts().by_status.get("Queued", 0) == 0 and not jobs:
                return

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    stop.set()
    assert max(seen) <= 3
    assert store.counts().by_status.get("Completed") == 60


# ------------------------------------------------------------ dependencies
def test_a_child_waits_for_its_last_parent(store: JobStore) -> None:
    p1 = store.enqueue("p", {"n": 1})
    p2 = store.enqueue("p", {"n": 2})
    child = store.enqueue("c", None, depends_on=[p1.id, p2.id])
    assert (child.status, child.pending_parents) == (S.Scheduled, 2)
    first = _run(store)
    assert {j.id for j in first} == {p1.id, p2.id}  # the child is never due by time
    store.clock_offset_s += 10 * 365 * 24 * 3600
    _ack_all(store, first[:1])
    assert store.get(child.id).status is S.Scheduled
    assert _run(store) == []
    _ack_all(store, first[1:])
    after = store.get(child.id)
    assert (after.status, after.pending_parents) == (S.Queued, 0)
    assert store.events(child.id)[-1].kind == EventKind.DEPENDENCIES_MET
    assert [j.id for j in _run(store)] == [child.id]
    assert {j.id for j in store.parents(child.id)} == {p1.id, p2.id}
    assert [j.id for j in store.children(p1.id)] == [child.id]


def test_batched_acks_release_children(store: JobStore) -> None:
    parent = store.enqueue("p", None)
    plain = store.enqueue("p", None)
    child = store.enqueue("c", None, depends_on=[parent.id])
    jobs = _run(store)
    out = store.complete_many([(j.id, j.lease_token, {"ok": 1}) for j in jobs], "w", return_jobs=False)
    assert out == [None, None]
    assert store.get(child.id).status is S.Queued
    assert store.get(plain.id).status is S.Completed


def test_a_failed_parent_cancels_the_child_and_its_dependents(store: JobStore) -> None:
    parent = store.enqueue("p", None, max_retries=0)
    child = store.enqueue("c", None, depends_on=[parent.id])
    grandchild = store.enqueue("g", None, depends_on=[child.id])
    [j] = _run(store)
    store.fail(j.id, j.lease_token, ERROR)
    for job in (child, grandchild):
        after = store.get(job.id)
        assert after.status is S.Canceled
        assert after.error and after.error["type"] == "ParentFailed"
    assert parent.id in (store.get(child.id).error or {})["message"]
    assert store.counts().by_status.get("Scheduled", 0) == 0


def test_on_parent_failure_run_runs_the_child(store: JobStore) -> None:
    parent = store.enqueue("p", None)
    child = store.enqueue("c", None, depends_on=[parent.id], on_parent_failure="run")
    store.cancel(parent.id, actor="operator:ann")
    assert store.get(child.id).status is S.Queued


def test_a_child_of_finished_parents(store: JobStore) -> None:
    done = store.enqueue("p", None, queue="p")
    [j] = _run(store, "p")
    store.complete(j.id, j.lease_token, 1)
    assert store.enqueue("c", None, depends_on=[done.id]).status is S.Queued
    failed = store.enqueue("p", None, max_retries=0, queue="p")
    [j] = _run(store, "p")
    store.fail(j.id, j.lease_token, ERROR)
    assert store.enqueue("c", None, depends_on=[failed.id]).status is S.Canceled
    assert store.enqueue("c", None, depends_on=[failed.id], on_parent_failure="run").status is S.Queued
    with pytest.raises(ValidationError) as err:
        store.enqueue("c", None, depends_on=["no-such-job"])
    assert err.value.field == "depends_on"


def test_a_parent_whose_lease_expires_is_retried_without_releasing_children(store: JobStore) -> None:
    parent = store.enqueue("p", None, max_retries=1)
    child = store.enqueue("c", None, depends_on=[parent.id])
    _run(store)
    expire_leases(store)
    store.recover_expired()
    assert store.get(parent.id).status is S.Scheduled
    assert store.get(child.id).status is S.Scheduled
    store.clock_offset_s += 3600
    _run(store)
    expire_leases(store)
    store.recover_expired()
    assert store.get(parent.id).status is S.Failed
    assert store.get(child.id).status is S.Canceled


def test_purge_keeps_a_parent_whose_children_still_wait(store: JobStore) -> None:
    p1 = store.enqueue("p", None)
    p2 = store.enqueue("p", None, delay_s=3600)
    child = store.enqueue("c", None, depends_on=[p1.id, p2.id])
    [j] = _run(store)
    store.complete(j.id, j.lease_token, {"kept": True})
    store.clock_offset_s += 600
    assert store.purge(60, statuses=[S.Completed]) == 0
    store.clock_offset_s += 3600
    [j2] = _run(store)
    store.complete(j2.id, j2.lease_token, None)
    assert store.get(child.id).status is S.Queued
    store.clock_offset_s += 600
    assert store.purge(60, statuses=[S.Completed]) == 2


# ---------------------------------------------------- batches and chains
def test_a_batch_runs_its_callback_once_all_have_finished(store: JobStore) -> None:
    specs = [JobSpec("t", {"i": i}, queue="b", max_retries=0) for i in range(4)]
    batch = store.create_batch(specs, JobSpec("summary", {"to": "ops"}, queue="b"))
    assert (batch.size, batch.counts, batch.finished) == (4, {"Queued": 4}, False)
    jobs = _run(store, "b")
    assert len(jobs) == 4 and all(j.batch_id == batch.id for j in jobs)
    _ack_all(store, jobs[:3])
    store.fail(jobs[3].id, jobs[3].lease_token, ERROR)
    after = store.get_batch(batch.id)
    assert after.counts == {"Completed": 3, "Failed": 1} and after.finished
    callback = store.get(batch.callback_job_id)
    assert callback.status is S.Queued
    assert sorted(p.status.name for p in store.parents(callback.id)) == ["Completed"] * 3 + ["Failed"]


def test_a_canceled_batch_cancels_its_waiting_jobs_and_callback(store: JobStore) -> None:
    batch = store.create_batch(
        [JobSpec("t", {"i": i}, queue="b") for i in range(3)], JobSpec("cb", None, queue="b")
    )
    [running] = _run(store, "b", 1)
    after = store.cancel_batch(batch.id, actor="operator:ann")
    assert after.counts == {"Canceled": 3} and after.finished
    assert after.canceled_by == "operator:ann"
    assert store.get(batch.callback_job_id).status is S.Canceled
    assert store.audit(1)[0].kind == EventKind.BATCH_CANCELED
    with pytest.raises(Exception):
        store.complete(running.id, running.lease_token, None)


def test_a_chain_runs_in_order(store: JobStore) -> None:
    chain = store.create_batch([JobSpec("step", {"n": n}, queue="c") for n in range(3)], kind="chain")
    order = []
    while True:
        jobs = _run(store, "c")
        if not jobs:
            break
        assert len(jobs) == 1
        order.append(jobs[0].payload["n"])
        _ack_all(store, jobs)
    assert order == [0, 1, 2]
    assert store.get_batch(chain.id).counts == {"Completed": 3}
