"""A store and the pure lifecycle model, driven side by side by hypothesis.

The model knows only ``store.lifecycle``: which operation may start from which
status, and the retry decision. After every step each job's status, token,
retries and lease expirations in the store must equal the model's.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from store import StoreSettings
from store.base import JobStore
from store.errors import InvalidTransition, LeaseLost
from store.lifecycle import OPERATIONS, JobStatus, Operation, RetryPolicy, decide_failure
from store.models import Lease

S = JobStatus
TTL = 100.0
ERROR = {"type": "E", "message": "m", "traceback": None}


@dataclass
class Model:
    status: JobStatus
    token: int = 0
    retry_count: int = 0
    lease_expirations: int = 0
    max_retries: int = 2
    expires_at: float | None = None  # model time of lease expiry
    delayed: bool = False  # enqueued with a delay no step reaches; cleared when made due


def zero_backoff_settings() -> StoreSettings:
    # Zero backoff: a Scheduled retry is due at once, so the model knows what is claimable.
    return StoreSettings(lease_ttl_s=TTL, retry=RetryPolicy(base_s=0.0, max_delay_s=0.0))


class LifecycleMachine(RuleBasedStateMachine):
    def __init__(self, store: JobStore) -> None:
        super().__init__()
        self.store = store
        self.queue = f"q-{uuid.uuid4().hex[:8]}"  # isolates this run from earlier examples
        self.jobs: dict[str, Model] = {}
        self.clock = 0.0  # model time, moved with the store's clock

    # ----------------------------------------------------------- helpers
    def _claimable(self) -> list[str]:
        return [i for i, m in self.jobs.items() if m.status in OPERATIONS[Operation.CLAIM].sources]

    def _running(self) -> list[str]:
        return [i for i, m in self.jobs.items() if m.status is S.InProgress]

    def _operator(self, op: Operation, job_id: str, call) -> None:
        model = self.jobs[job_id]
        if model.status in OPERATIONS[op].sources:
            call(job_id)
            [model.status] = OPERATIONS[op].targets
            model.expires_at = None
            if op is Operation.REQUEUE:
                model.retry_count = model.lease_expirations = 0
            if op is not Operation.CANCEL:
                model.delayed = False  # due now
        else:
            try:
                call(job_id)
            except InvalidTransition:
                return
            raise AssertionError(f"{op} from {model.status.name} was not refused")

    # ------------------------------------------------------------- rules
    @rule(max_retries=st.integers(0, 2), delayed=st.booleans())
    def enqueue(self, max_retries: int, delayed: bool) -> None:
        # Distinct priorities make the store's claim order independent of clock
        # ties and random ids, so hypothesis can replay a run exactly.
        options = {"queue": self.queue, "max_retries": max_retries, "priority": -len(self.jobs)}
        if delayed:  # Scheduled for much later than any step can reach
            options["delay_s"] = 10**6
        job = self.store.enqueue("t", **options)
        self.jobs[job.id] = Model(job.status, max_retries=max_retries, delayed=delayed)

    @rule(n=st.integers(1, 3))
    def claim(self, n: int) -> None:
        due = [i for i in self._claimable() if not self.jobs[i].delayed]
        claimed = self.store.claim("w", [self.queue], n, lease_ttl_s=TTL)
        assert len(claimed) == min(n, len(due))
        for job in claimed:
            model = self.jobs[job.id]
            assert job.id in due
            model.status, model.token = S.InProgress, model.token + 1
            model.expires_at = self.clock + TTL
            assert job.lease_token == model.token

    @precondition(lambda self: self._running())
    @rule(data=st.data(), stale=st.booleans())
    def complete(self, data: st.DataObject, stale: bool) -> None:
        job_id = data.draw(st.sampled_from(self._running()))
        model = self.jobs[job_id]
        token = model.token - 1 if stale else model.token
        if stale:
            try:
                self.store.complete(job_id, token, None)
            except LeaseLost:
                return
            raise AssertionError("stale completion accepted")
        self.store.complete(job_id, token, {"ok": True})
        model.status, model.expires_at = S.Completed, None

    @precondition(lambda self: self._running())
    @rule(data=st.data(), permanent=st.booleans())
    def fail(self, data: st.DataObject, permanent: bool) -> None:
        job_id = data.draw(st.sampled_from(self._running()))
        model = self.jobs[job_id]
        decision = decide_failure(
            model.retry_count, model.max_retries, RetryPolicy(0, 0), permanent=permanent
        )
        self.store.fail(job_id, model.token, ERROR, permanent=permanent)
        model.status, model.retry_count, model.expires_at = decision.status, decision.retry_count, None

    @precondition(lambda self: self._running())
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        job_id = data.draw(st.sampled_from(self._running()))
        model = self.jobs[job_id]
        result = self.store.heartbeat("w", [Lease(job_id, model.token)], TTL)
        if model.expires_at is not None and model.expires_at >= self.clock:
            assert [x.job_id for x in result.renewed] == [job_id]
            model.expires_at = self.clock + TTL
        else:
            assert [x.job_id for x in result.refused] == [job_id]

    # Steps of 30 s and TTL + 10 s never sum to exactly TTL (30a + 110b !=
    # 100), and every sum is at least 10 s from it, so the real seconds an
    # example takes on a loaded machine (the store's clock runs with them)
    # cannot tip a lease over its edge.
    @rule(seconds=st.sampled_from([30.0, TTL + 10]))
    def time_passes(self, seconds: float) -> None:
        self.store.clock_offset_s += seconds
        self.clock += seconds

    @rule()
    def recover(self) -> None:
        expired = {i for i, m in self.jobs.items() if m.status is S.InProgress and m.expires_at < self.clock}
        while True:
            report = self.store.recover_expired(limit=1000)
            mine = [r for r in report.recovered + report.failed if r.job_id in self.jobs]
            for r in mine:
                assert r.job_id in expired
                model = self.jobs[r.job_id]
                decision = decide_failure(model.retry_count, model.max_retries, RetryPolicy(0, 0))
                assert r.outcome is decision.status
                model.status, model.retry_count = decision.status, decision.retry_count
                model.lease_expirations += 1
                model.expires_at = None
                expired.discard(r.job_id)
            if not report.more:
                break
        assert not expired

    @precondition(lambda self: self.jobs)
    @rule(data=st.data(), op=st.sampled_from([Operation.CANCEL, Operation.REQUEUE, Operation.RETRY_NOW]))
    def operator(self, data: st.DataObject, op: Operation) -> None:
        job_id = data.draw(st.sampled_from(list(self.jobs)))
        calls = {
            Operation.CANCEL: self.store.cancel,
            Operation.REQUEUE: self.store.requeue,
            Operation.RETRY_NOW: self.store.retry_now,
        }
        self._operator(op, job_id, calls[op])

    # -------------------------------------------------------- invariants
    @invariant()
    def store_agrees_with_model(self) -> None:
        for job_id, model in self.jobs.items():
            job = self.store.get(job_id)
            assert job.status is model.status, (job_id, job.status, model.status)
            assert job.lease_token == model.token
            assert (job.retry_count, job.lease_expirations) == (model.retry_count, model.lease_expirations)
            assert job.retry_count <= job.max_retries


def test_store_follows_the_lifecycle_model(handle) -> None:
    store = handle.open(zero_backoff_settings())
    run_state_machine_as_test(
        lambda: LifecycleMachine(store),
        settings=settings(
            max_examples=int(os.environ.get("LH_SM_EXAMPLES", "15")),
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
