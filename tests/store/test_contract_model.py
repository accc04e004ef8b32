"""Every store against the reference model (tests/model/model.py), driven by
the same random operations: enqueue (delays, priorities, limit keys,
idempotency and unique keys, parents), batches with callbacks, claims under
queue limits and pauses, acks, nacks through the retry decision, operator
cancel, requeue, retry-now and delete, recovery of expired leases, and the
store's clock moved (never slept on) with the model's and only with it
(tests/model/clock.py). After every step what a user can
observe must agree: each job's status, attempts (retry_count, lease
expirations), token and error type; counts by queue; the exact listing of
every status of every queue; a batch's counts and job ids. A claim may return
fewer jobs than asked only when the model has no other admissible job.

Examples: LEASEHOLD_MODEL_EXAMPLES (default 8 a store, ``make test``) of
LEASEHOLD_MODEL_STEPS steps (default 30); a nightly run sets more (tests/README.md).
Each example has its own queues and keys in one store per test, so examples
share nothing they can see.
"""

from __future__ import annotations

import itertools
import os
import time
import uuid

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from store import StoreSettings, bulk
from store.base import MAX_PAGE_SIZE, JobStore
from store.bulk_select import ACTIONS
from store.cursor import encode_cursor
from store.errors import InvalidTransition, JobNotFound, LeaseLost, ValidationError
from store.flow_rules import ParentFailure, QueueLimits, Rate
from store.lifecycle import JobStatus, Operation, RetryPolicy, RunAgain
from store.models import JobSpec, Lease
from store.redis.shards import shard_of_queue
from tests.backends import TEST_SHARDS, StoreHandle
from tests.model.clock import ModelClock
from tests.model.model import HANDLER_ERROR, LEASE_EXPIRED, MJob, Model

S = JobStatus
#: The model's unit of time, seconds: every duration below and every tick is
#: a whole number of units, so a time difference that is not a tie is a unit
#: from its threshold, against the milliseconds of real time the store's
#: writes add to its clock (tests/model/clock.py).
UNIT = 10.0
TTL = 10 * UNIT
RETRY = RetryPolicy(base_s=5 * UNIT, max_delay_s=20 * UNIT)
#: A handler's own backoff, as a worker passes it to ``store.fail``.
HANDLER_RETRY = RETRY.overridden(base_s=1.5 * UNIT, max_delay_s=7 * UNIT)
ERROR = {"type": HANDLER_ERROR, "message": "boom", "traceback": None}
EXAMPLES = int(os.environ.get("LEASEHOLD_MODEL_EXAMPLES", "8"))
STEPS = int(os.environ.get("LEASEHOLD_MODEL_STEPS", "30"))
#: Steps the store's clock is moved by: around the lease TTL, the backoff
#: (10, 20 units) and the rate window (20 units), ties included.
TICKS = [1 * UNIT, 5 * UNIT, 10 * UNIT, 20 * UNIT]
#: LEASEHOLD_MODEL_SHRINK=0 reports a failure as found, unshrunk (faster
#: while hunting; the shrunk sequence is what a fix's regression test copies).
PHASES = [p for p in Phase if p is not Phase.shrink or os.environ.get("LEASEHOLD_MODEL_SHRINK") != "0"]
#: A handler's request to run again (``raise Retry``/``raise Snooze``), or None: a plain failure.
SNOOZES = [RunAgain(5 * UNIT, snooze=True, max_snoozes=n) for n in (0, 1, 2)]
AGAINS = [None, None, RunAgain(5 * UNIT), RunAgain(15 * UNIT), *SNOOZES]
AGAIN = st.sampled_from(AGAINS)
WINDOW = 20 * UNIT
DELAY = 10 * UNIT
UNIQUE_FOR = 30 * UNIT
LIMITS = st.builds(
    QueueLimits,
    concurrency=st.sampled_from([None, 2]),
    per_key_concurrency=st.sampled_from([None, 1]),
    rate=st.sampled_from([None, Rate(3, WINDOW)]),
    per_key_rate=st.sampled_from([None, Rate(2, WINDOW)]),
)
#: Every duration the model compares a time difference with: the lease, each
#: backoff delay, a run-again's, the rate window, a delay, ``unique_for``.
THRESHOLDS = {
    TTL, WINDOW, DELAY, UNIQUE_FOR,
    *(policy.delay_s(n) for policy in (RETRY, HANDLER_RETRY) for n in range(1, 9)),
    *(again.after_s for again in AGAINS if again is not None),
}  # fmt: skip


def queue_on_shard(stem: str, shard: int) -> str:
    """``stem`` and the first number that puts the queue on ``shard`` of a
    TEST_SHARDS-shard store (store.redis.shards.shard_of_queue)."""
    return next(f"{stem}{n}" for n in itertools.count() if shard_of_queue(f"{stem}{n}", TEST_SHARDS) == shard)


class StoreAgainstModel(RuleBasedStateMachine):
    def __init__(self, store: JobStore) -> None:
        super().__init__()
        #: The store, its clock moved by the model's ticks only (tests/model/clock.py).
        self.clock = ModelClock(store, THRESHOLDS)
        self.store: JobStore = self.clock  # type: ignore[assignment]
        tag = uuid.uuid4().hex[:8]
        self.tag = tag
        # On a sharded store queue a is on shard 0 and b on shard 1, in every
        # example: where a queue falls decides which calls a claim makes,
        # and hypothesis replays an example only if the store answers it the
        # same way (a random tag once put both on one shard, once not). On
        # two shards, claims, dependencies and a batch's callback cross them.
        self.queues = [queue_on_shard(f"m{tag}a", 0), queue_on_shard(f"m{tag}b", 1)]
        self.model = Model(RETRY, TTL)

    # ------------------------------------------------------------ helpers
    # Jobs are drawn by their place in the model (enqueue order), never by
    # their ids: the store makes new ids each run, which hypothesis must not see.
    def _ids(self) -> list[str]:
        return list(self.model.jobs)

    def _running(self) -> list[str]:
        return [i for i, j in self.model.jobs.items() if j.status is S.InProgress]

    def _pick(self, data: st.DataObject, ids: list[str]) -> str:
        return ids[data.draw(st.integers(0, len(ids) - 1))]

    def _spec(self, queue: int, priority: int, max_retries: int, key: str | None) -> JobSpec:
        return JobSpec(
            "t", {"n": len(self.model.jobs)}, queue=self.queues[queue], priority=priority,
            max_retries=max_retries, limit_key=key,
        )  # fmt: skip

    def _mjob(self, job_id: str, spec: JobSpec) -> MJob:
        return MJob(
            job_id, spec.queue, S.Queued, spec.max_retries or 0, self.model.t, None,
            priority=spec.priority, limit_key=spec.limit_key,
        )  # fmt: skip

    # --------------------------------------------------------------- rules
    @initialize(limits=LIMITS)
    def set_limits(self, limits: QueueLimits) -> None:
        """Queue a has limits for the whole example (set before any job)."""
        if limits.any:
            self.store.set_queue_limits(self.queues[0], limits)
            self.model.limits[self.queues[0]] = limits

    @rule(
        queue=st.integers(0, 1),
        priority=st.integers(0, 1),
        max_retries=st.integers(0, 2),
        delay=st.sampled_from([0.0, 0.0, DELAY]),
        key=st.sampled_from([None, "x", "y"]),
        dedup=st.sampled_from([None, "idem", "unique"]),
        dedup_key=st.sampled_from(["k1", "k2"]),
    )
    def enqueue(self, queue, priority, max_retries, delay, key, dedup, dedup_key) -> None:
        spec = self._spec(queue, priority, max_retries, key)
        idem = f"{self.tag}-{dedup_key}" if dedup == "idem" else None
        unique = f"{self.tag}-{dedup_key}" if dedup == "unique" else None
        spec = JobSpec(
            spec.name, spec.payload, queue=spec.queue, priority=priority, max_retries=max_retries,
            delay_s=delay, limit_key=key, idempotency_key=idem, unique_key=unique,
            unique_for=UNIQUE_FOR if unique else None,
        )  # fmt: skip
        if unique and key:  # refused on every store (store/spec.py)
            with pytest.raises(ValidationError):
                self.store.enqueue_idempotent(spec)
            return
        expected = self.model.existing(idem, unique)
        job, created = self.store.enqueue_idempotent(spec)
        if expected is not None:
            assert (job.id, created) == (expected, False), (dedup, job.id, expected)
            return
        assert created
        mjob = self._mjob(job.id, spec)
        mjob.idempotency_key, mjob.unique_key = idem, unique
        mjob.unique_for = spec.unique_for
        self.model.enqueue(mjob, delay)
        assert job.status is mjob.status

    @precondition(lambda self: self.model.jobs)
    @rule(
        data=st.data(),
        queue=st.integers(0, 1),
        policy=st.sampled_from(list(ParentFailure)),
        n=st.integers(1, 2),
        key=st.sampled_from([None, "x"]),
    )
    def enqueue_child(self, data, queue, policy, n, key) -> None:
        ids = self._ids()
        picks = data.draw(st.lists(st.integers(0, len(ids) - 1), min_size=1, max_size=n, unique=True))
        parents = [ids[i] for i in picks]
        spec = JobSpec(
            "c", None, queue=self.queues[queue], max_retries=1, limit_key=key,
            depends_on=tuple(parents), on_parent_failure=policy.value,
        )  # fmt: skip
        job = self.store.enqueue_idempotent(spec)[0]
        mjob = self._mjob(job.id, spec)
        mjob.parents, mjob.policy = tuple(parents), policy
        self.model.enqueue(mjob, 0.0)
        assert (job.status, job.pending_parents) == (mjob.status, mjob.pending), (job.id, parents)

    @rule(size=st.integers(1, 3), callback=st.booleans(), queue=st.integers(0, 1))
    def batch(self, size, callback, queue) -> None:
        specs = [self._spec(queue, 0, 0, None) for _ in range(size)]
        cb = JobSpec("cb", None, queue=self.queues[1], max_retries=0) if callback else None
        batch = self.store.create_batch(specs, cb)
        jobs = self.store.batch_jobs(batch.id, limit=10)
        assert [j.batch_id for j in jobs] == [batch.id] * size
        mjobs = [self._mjob(j.id, s) for j, s in zip(jobs, specs, strict=True)]
        mcb = self._mjob(batch.callback_job_id, cb) if cb else None
        self.model.create_batch(batch.id, mjobs, mcb)

    @rule(n=st.integers(1, 4), which=st.sampled_from([(0,), (1,), (0, 1)]))
    def claim(self, n, which) -> None:
        queues = [self.queues[i] for i in which]
        got = self.store.claim("w-model", queues, n, lease_ttl_s=TTL)
        self.model.check_claim(queues, n, [(j.id, j.lease_token) for j in got])

    @precondition(lambda self: self._running())
    @rule(data=st.data(), stale=st.booleans())
    def complete(self, data, stale) -> None:
        job_id = self._pick(data, self._running())
        token = self.model.jobs[job_id].token
        if stale:
            with pytest.raises(LeaseLost):
                self.store.complete(job_id, token - 1, None)
            return
        self.store.complete(job_id, token, {"ok": True})
        self.model.complete(job_id)

    @precondition(lambda self: self._running())
    @rule(data=st.data(), permanent=st.booleans(), policy=st.sampled_from([None, HANDLER_RETRY]), again=AGAIN)
    def fail(self, data, permanent, policy, again) -> None:
        job_id = self._pick(data, self._running())
        permanent = permanent and again is None  # a handler raises one or the other
        error = ERROR if again is None else {**ERROR, "type": again.error_type}
        token = self.model.jobs[job_id].token
        self.store.fail(job_id, token, error, permanent=permanent, policy=policy, again=again)
        self.model.fail(job_id, permanent, policy=policy, again=again)

    @precondition(lambda self: self._running())
    @rule(data=st.data())
    def release(self, data) -> None:
        job_id = self._pick(data, self._running())
        self.store.release(job_id, self.model.jobs[job_id].token, "w-model")
        self.model.release(job_id)

    @precondition(lambda self: self._running())
    @rule(data=st.data())
    def heartbeat(self, data) -> None:
        job_id = self._pick(data, self._running())
        result = self.store.heartbeat("w-model", [Lease(job_id, self.model.jobs[job_id].token)], TTL)
        renewed = self.model.heartbeat(job_id)
        assert [x.job_id for x in (result.renewed if renewed else result.refused)] == [job_id]

    @precondition(lambda self: self.model.jobs)
    @rule(
        data=st.data(),
        op=st.sampled_from([Operation.CANCEL, Operation.REQUEUE, Operation.RETRY_NOW, Operation.DELETE]),
        reset=st.booleans(),
    )
    def operator(self, data, op, reset) -> None:
        job_id = self._pick(data, self._ids())
        calls = {
            Operation.CANCEL: lambda: self.store.cancel(job_id, actor="operator:model"),
            Operation.REQUEUE: lambda: self.store.requeue(
                job_id, actor="operator:model", reset_retries=reset
            ),
            Operation.RETRY_NOW: lambda: self.store.retry_now(job_id, actor="operator:model"),
            Operation.DELETE: lambda: self.store.delete(job_id, actor="operator:model"),
        }
        status = self.model.jobs[job_id].status
        refused = self.model.operator(op, job_id, reset_retries=reset)
        if refused is None:
            calls[op]()
            return
        with pytest.raises(refused) as raised:
            calls[op]()
        assert type(raised.value) is refused, (op, status, raised.value)

    @precondition(lambda self: self.model.jobs)
    @rule(
        data=st.data(),
        action=st.sampled_from(sorted(ACTIONS)),
        by=st.sampled_from(["queue", "status", "ids"]),
        status=st.sampled_from([S.Queued, S.Scheduled, S.Failed, S.Canceled, S.Completed]),
        queue=st.integers(0, 1),
    )
    def bulk_operation(self, data, action, by, status, queue) -> None:
        """A bulk operation (store/bulk.py) by queue, by queue and status, or
        on selected ids, run to its end in one batch as a worker runs it."""
        filter_: dict = {"queue": self.queues[queue]}
        if by == "status":
            filter_["status"] = status.name
        elif by == "ids":
            ids = self._ids()
            picks = data.draw(st.lists(st.integers(0, len(ids) - 1), min_size=1, max_size=6, unique=True))
            filter_ = {"ids": [ids[i] for i in picks]}
        operation = bulk.start(self.store, action, filter_, "operator:model", expected=0)
        if by == "ids":
            walk = filter_["ids"]
        else:  # the page run_batch reads: the listing from the operation's creation on
            assert operation.created_at is not None
            page = self.store.list_jobs(
                status=status if by == "status" else None, queue=filter_["queue"], limit=MAX_PAGE_SIZE,
                cursor=encode_cursor(operation.created_at.timestamp(), "~"),
            )  # fmt: skip
            walk = [j.id for j in page.items]
            want = [i for i, j in self.model.jobs.items() if j.queue == filter_["queue"]]
            if by == "status":
                want = [i for i in want if self.model.jobs[i].status is status]
            assert sorted(walk) == sorted(want), (filter_, walk, want)
        read = {i: self.model.jobs[i].status for i in walk}
        done = bulk.run_batch(self.store, operation, batch=MAX_PAGE_SIZE)
        assert done.state == "done", done
        changed, skipped = self.model.bulk(ACTIONS[action], walk, read)
        assert (done.changed, done.skipped) == (changed, skipped), (action, filter_, done)

    @rule(queue=st.integers(0, 1), limits=LIMITS)
    def change_limits(self, queue, limits) -> None:
        """A queue's limits set, changed or cleared while its jobs run."""
        name = self.queues[queue]
        self.store.set_queue_limits(name, limits, actor="operator:model")
        self.model.limits[name] = limits

    @rule(queue=st.integers(0, 1), paused=st.booleans())
    def pause(self, queue, paused) -> None:
        name = self.queues[queue]
        if paused:
            self.store.pause_queue(name, actor="operator:model")
        else:
            self.store.resume_queue(name, actor="operator:model")
        self.model.pause(name, paused)

    @rule(seconds=st.sampled_from(TICKS))
    def time_passes(self, seconds) -> None:
        # A tie in the model (a lease ending as the clock reaches it) is past
        # in the store, whatever the store clock's resolution (ModelClock).
        self.clock.tick(seconds)
        self.model.t += seconds

    @rule()
    def recover(self) -> None:
        expected = set(self.model.expired())
        seen: dict[str, JobStatus] = {}
        while True:
            report = self.store.recover_expired(limit=1000)
            for r in report.recovered + report.failed:
                if r.job_id in self.model.jobs:
                    seen[r.job_id] = r.outcome
            if not report.more:
                break
        assert set(seen) == expected, (sorted(seen), sorted(expected))
        for job_id in sorted(expected):
            outcome = self.model.fail(job_id, False, LEASE_EXPIRED, expired=True)
            assert seen[job_id] is outcome

    # ---------------------------------------------------------- invariant
    @invariant()
    def store_agrees_with_model(self) -> None:
        for job_id, m in self.model.jobs.items():
            job = self.store.get(job_id)
            got = (job.status, job.retry_count, job.lease_expirations, job.lease_token)
            want = (m.status, m.retry_count, m.lease_expirations, m.token)
            assert got == want, (job_id, got, want)
            assert (job.error or {}).get("type") == m.error_type, (job_id, job.error, m.error_type)
        counts = self.store.counts().by_queue
        for queue in self.queues:
            limits = self.model.limits.get(queue, QueueLimits())
            if limits.any:
                got_use = self.store.limit_usage(queue).in_use(limits)
                assert got_use == self.model.usage(queue).in_use(limits), (queue, limits)
            assert counts.get(queue, {}) == self.model.counts(queue), queue
            for status in S:
                page = self.store.list_jobs(status=status, queue=queue, limit=500)
                assert {j.id for j in page.items} == self.model.listed(status, queue), (queue, status)
        for batch_id, mb in self.model.batches.items():
            batch = self.store.get_batch(batch_id)
            assert batch.counts == self.model.batch_counts(batch_id), batch_id
            assert batch.job_ids == [i for i in mb.job_ids if i in self.model.jobs]  # deleted ones gone
            assert batch.callback_job_id == mb.callback_id


def test_every_store_agrees_with_the_model(handle: StoreHandle) -> None:
    store = handle.open(StoreSettings(lease_ttl_s=TTL, retry=RETRY))
    run_state_machine_as_test(
        lambda: StoreAgainstModel(store),
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
            report_multiple_bugs=False,
            phases=PHASES,
        ),
    )


def test_the_model_refuses_what_the_table_refuses() -> None:
    """The model's own sanity: an operator operation from a status outside
    its sources is refused, and a missing job is not found."""
    model = Model(RETRY, TTL)
    model.enqueue(MJob("a", "q", S.Queued, 0, 0.0, None), 0.0)
    assert model.operator(Operation.RETRY_NOW, "a") is InvalidTransition
    assert model.operator(Operation.CANCEL, "b") is JobNotFound
    assert model.operator(Operation.CANCEL, "a") is None
    assert model.jobs["a"].status is S.Canceled


def test_a_rate_window_stays_exact_however_long_the_steps_take(handle: StoreHandle) -> None:
    """The harness's clock (tests/model/clock.py), finer than the random runs'
    unit: three starts under a rate of 3 per 20 s, then 19 ticks of 1 s, the
    steps taking more than a second of real time in all: the starts are in
    the window in the store as in the model, and out of it at the 20th tick
    (a tie) in both."""
    store = handle.open(StoreSettings(lease_ttl_s=TTL, retry=RETRY))
    machine = StoreAgainstModel(store)
    machine.set_limits(QueueLimits(rate=Rate(3, 20.0)))
    for _ in range(3):
        machine.enqueue(0, 0, 0, 0.0, None, None, "k1")
    machine.claim(3, (0,))
    for _ in range(20):
        machine.store_agrees_with_model()
        time.sleep(0.06)  # a step of a loaded machine, between the model's steps
        machine.time_passes(1.0)
    assert machine.model.usage(machine.queues[0]).starts == 0
    machine.store_agrees_with_model()
