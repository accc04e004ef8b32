"""Contract: a handler's own retry policy decides its jobs' retries on every
store: the one a worker passes to ``fail`` (``policy=``), and in recovery,
where no worker of the handler is at hand, the one the worker registry
publishes (store/catalogue.py ``retry_policies``); a malformed published
policy is skipped and the store's default applies."""

from __future__ import annotations

import pytest

from store.base import JobStore
from store.catalogue import catalogue
from store.lifecycle import JobStatus
from store.models import WorkerInfo, ts
from tests.store.helpers import expire_leases
from tests.store.test_contract_catalogue import SLOW
from workers.execute import run_handler
from workers.handlers import JobContext, get_handler, load_handlers

load_handlers(["tests.retry_policy_handlers"])

S = JobStatus
ERROR = {"type": "KeyError", "message": "'k'", "traceback": None}
#: A handler's own backoff: 30 s base, up to 10 minutes.
OWN = {**SLOW, "name": "own", "queue": "default", "retry_base_s": 30.0, "retry_jitter": 0.0}


def _wait_s(job) -> float:
    """How long after its failure a Scheduled job is due, by the store's clock."""
    return (job.retry_delay_until - job.last_updated_at).total_seconds()


def _publish(store: JobStore, worker_id: str, handlers: list) -> None:
    info = WorkerInfo(worker_id, "h", 1, ["default"], 2, started_at=ts(store.now()), handlers=handlers)
    store.worker_heartbeat(info)


def test_fail_waits_the_backoff_of_the_policy_given(store: JobStore) -> None:
    default = store.settings.retry
    own = default.overridden(base_s=30.0, max_delay_s=600.0)
    first, second = store.enqueue("own", max_retries=3), store.enqueue("plain", max_retries=3)
    claimed = {j.id: j for j in store.claim("w", ["default"], 2)}
    mine = store.fail(first.id, claimed[first.id].lease_token, ERROR, policy=own, worker_id="w")
    theirs = store.fail(second.id, claimed[second.id].lease_token, ERROR, worker_id="w")
    assert (mine.status, mine.retry_count) == (theirs.status, theirs.retry_count) == (S.Scheduled, 1)
    assert _wait_s(mine) == pytest.approx(60.0, abs=0.01)  # 30 s * 2**1, by the store's clock
    assert _wait_s(theirs) == pytest.approx(default.delay_s(1), abs=0.01)
    store.clock_offset_s += 59
    assert [j.id for j in store.claim("w", ["default"], 2)] == [second.id]
    store.clock_offset_s += 2
    [again] = store.claim("w", ["default"], 2)
    later = store.fail(first.id, again.lease_token, ERROR, policy=own, worker_id="w")
    assert (later.retry_count, _wait_s(later)) == (2, pytest.approx(120.0, abs=0.01))
    [event] = [e for e in store.events(first.id) if e.kind == "retry_scheduled"][-1:]
    assert "120" in (event.message or "")


def _run_and_nack(store: JobStore, name: str, payload: dict) -> str:
    """Enqueue, claim and run a job of ``name`` as a worker does: its
    outcome from the handler (workers/execute.py classifies the exception),
    failed with the handler's backoff (workers/outcomes.py). Its id."""
    spec = get_handler(name)
    assert spec is not None
    job = store.enqueue(name, payload, max_retries=spec.max_retries)
    [claimed] = store.claim("w", ["default"], 1)
    outcome = run_handler(spec, JobContext.for_job(claimed, "w"))
    policy = spec.retry_policy(store.settings.retry)
    assert outcome.error is not None
    store.fail(job.id, claimed.lease_token, outcome.error, permanent=outcome.permanent, policy=policy)
    return job.id


def test_retry_on_and_give_up_on_through_the_handlers_own_decision(store: JobStore) -> None:
    for name, final, retried, wait_s in (
        ("retry-on-key-error", "ValueError", "KeyError", 60.0),
        ("give-up-on-value-error", "ValueError", "KeyError", 40.0),
    ):
        failed = store.get(_run_and_nack(store, name, {"raise": final}))
        assert (failed.status, failed.retry_count, failed.error["type"]) == (S.Failed, 0, final), name
        assert failed.max_retries == 3  # retries left, none spent: failed for good at once
        again = store.get(_run_and_nack(store, name, {"raise": retried}))
        assert (again.status, again.retry_count, again.error["type"]) == (S.Scheduled, 1, retried), name
        assert _wait_s(again) == pytest.approx(wait_s, abs=0.01), name  # the handler's base * 2


def test_recovery_waits_the_backoff_its_handler_publishes(store: JobStore) -> None:
    _publish(store, "w-1", [OWN])
    own, plain = store.enqueue("own", max_retries=2), store.enqueue("plain", max_retries=2)
    assert len(store.claim("w-1", ["default"], 2)) == 2
    expire_leases(store)
    preview = {r.job_id: r.delay_s for r in store.preview_recovery().recovered}
    assert preview == {own.id: 60.0, plain.id: store.settings.retry.delay_s(1)}
    report = store.recover_expired()
    assert sorted(r.job_id for r in report.recovered) == sorted([own.id, plain.id])
    recovered = store.get(own.id)
    assert (recovered.status, recovered.retry_count, recovered.lease_expirations) == (S.Scheduled, 1, 1)
    assert _wait_s(recovered) == pytest.approx(60.0, abs=0.01)
    assert _wait_s(store.get(plain.id)) == pytest.approx(store.settings.retry.delay_s(1), abs=0.01)


def test_recovery_reads_a_silent_workers_policy_and_the_newest_wins(store: JobStore) -> None:
    _publish(store, "w-old", [{**OWN, "retry_base_s": 7.0}])
    store.clock_offset_s += 1
    _publish(store, "w-new", [OWN])  # seen last: its policy wins
    job = store.enqueue("own", max_retries=1)
    store.claim("w-new", ["default"], 1)
    store.clock_offset_s += 3 * 30.0 + 1  # both silent past three lease TTLs: out of the catalogue
    assert catalogue(store) == {}
    store.recover_expired()
    assert _wait_s(store.get(job.id)) == pytest.approx(60.0, abs=0.01)


#: Retry policies a worker of another version (or a bug) could publish.
MALFORMED_POLICIES = [
    {"retry_base_s": -1.0},
    {"retry_max_delay_s": "1h"},
    {"retry_jitter": 1.5},
    {"retry_jitter": True},
    {"retry_on": "KeyError"},
    {"give_up_on": [3]},
]


@pytest.mark.parametrize("bad", MALFORMED_POLICIES, ids=lambda b: next(iter(b)))
def test_a_malformed_published_policy_is_skipped_for_the_default(store: JobStore, bad: dict) -> None:
    _publish(store, "w-bad", [{**OWN, **bad}, {**OWN, "name": "fine"}])
    assert sorted(catalogue(store)) == ["fine"]  # the bad entry skipped, never an error
    job = store.enqueue("own", max_retries=1)
    store.claim("w-bad", ["default"], 1)
    expire_leases(store)
    [done] = store.recover_expired().recovered
    assert done.job_id == job.id and done.delay_s == store.settings.retry.delay_s(1)
