"""A reference model of the store contract, in pure Python, for the stateful
test that drives it beside every real store (tests/store/test_contract_model.py).

It decides nothing the lifecycle table decides: each operation's sources and
targets come from ``store.lifecycle.OPERATIONS``, a failure's outcome from
``decide_failure``, a requeue's wait for parents from ``unfinished_parent``,
a limit from ``store.flow_rules.hold``/``admit`` and a dependency from
``store.flow_rules.child_status_at_enqueue``/``on_parent_finished``. It adds only
what the table does not say: which jobs a claim may take (due, queue not
paused, limits, dependencies), what counts and listings show, which job an
idempotency or unique key names, what recovery finds.

Time is the model's clock ``t`` (seconds since the example began), moved in
step with the store's clock (tests/model/clock.py). The store's clock moves
only forward, a little more than the model's at each tick and by a write's
own duration, so a tie in the model (a due time equal to ``t``) is "past" in
the store: every comparison below treats a tie that way (due, expired, out
of a window, older than ``unique_for``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from store.errors import InvalidTransition, JobNotFound, ParentUnfinished
from store.flow_rules import (
    ParentFailure,
    QueueLimits,
    Usage,
    admit,
    child_status_at_enqueue,
    hold,
    on_parent_finished,
)
from store.lifecycle import (
    AWAIT_PARENTS,
    OPERATIONS,
    TERMINAL,
    JobStatus,
    Operation,
    RetryPolicy,
    RunAgain,
    decide_failure,
    enqueue_target,
    is_expired,
    unfinished_parent,
)

S = JobStatus
#: Error types the model expects on a job.
HANDLER_ERROR = "RuntimeError"
LEASE_EXPIRED = "LeaseExpired"
PARENT_FAILED = "ParentFailed"


@dataclass
class MJob:
    """What the model knows of one job."""

    id: str
    queue: str
    status: JobStatus
    max_retries: int
    created_at: float
    due_at: float | None  # None: never due by time (waiting for parents)
    priority: int = 0
    limit_key: str | None = None
    retry_count: int = 0
    lease_expirations: int = 0
    snoozes: int = 0  # failed attempts of type Snooze, never reset (lifecycle.count_snoozes)
    token: int = 0
    error_type: str | None = None
    lease_expires_at: float | None = None
    parents: tuple[str, ...] = ()
    policy: ParentFailure = ParentFailure.CANCEL
    pending: int = 0
    waiting_on: set[str] = field(default_factory=set)
    children: list[str] = field(default_factory=list)
    idempotency_key: str | None = None
    unique_key: str | None = None
    unique_for: float | None = None
    batch_id: str | None = None
    expires_at: float | None = None  # a claim never leases it from then on (lifecycle.is_expired)


@dataclass
class MBatch:
    id: str
    job_ids: list[str]
    callback_id: str | None


@dataclass
class Model:
    """The store as the contract says it must be, after each operation."""

    retry: RetryPolicy
    lease_ttl_s: float
    limits: dict[str, QueueLimits] = field(default_factory=dict)
    t: float = 0.0
    jobs: dict[str, MJob] = field(default_factory=dict)
    paused: set[str] = field(default_factory=set)
    idempotency: dict[str, str] = field(default_factory=dict)
    unique: dict[str, str] = field(default_factory=dict)
    #: Starts by queue: (model time, limit key), for the rate windows. A
    #: start is recorded only while its queue has a rate or a per-key rate
    #: (either): an unlimited queue's claim writes no history, so a rate set
    #: later counts the starts from then on, on every store.
    starts: dict[str, list[tuple[float, str | None]]] = field(default_factory=dict)
    batches: dict[str, MBatch] = field(default_factory=dict)

    # ------------------------------------------------------------ enqueue
    def existing(self, idempotency_key: str | None, unique_key: str | None) -> str | None:
        """The job an enqueue with these keys returns instead of a new one."""
        if idempotency_key is not None and idempotency_key in self.idempotency:
            return self.idempotency[idempotency_key]
        if unique_key is not None and unique_key in self.unique:
            holder = self.jobs[self.unique[unique_key]]
            young = holder.unique_for is not None and self.t - holder.created_at < holder.unique_for
            if holder.status not in TERMINAL or young:
                return holder.id
        return None

    def enqueue(self, job: MJob, delay_s: float) -> None:
        """Add a new ``job`` (its id from the store): ENQUEUE's target, or
        the status its parents give it."""
        job.created_at = self.t
        if job.parents:
            found = {p: self.jobs[p].status for p in job.parents if p in self.jobs}
            change = child_status_at_enqueue(found, job.policy)
            job.status, job.pending = change.status, change.pending
            job.waiting_on = {p for p, st in found.items() if st not in TERMINAL}
            if change.status is S.Canceled:
                job.error_type, job.waiting_on = PARENT_FAILED, set()
            for p in job.parents:
                if p in self.jobs:
                    self.jobs[p].children.append(job.id)
            job.due_at = self.t if change.status is S.Queued else None
        else:
            job.status = enqueue_target(delay_s)
            job.due_at = self.t + delay_s
        self.jobs[job.id] = job
        if job.idempotency_key is not None:
            self.idempotency[job.idempotency_key] = job.id
        if job.unique_key is not None:
            self.unique[job.unique_key] = job.id

    def create_batch(self, batch_id: str, jobs: Sequence[MJob], callback: MJob | None) -> None:
        for job in jobs:
            job.batch_id = batch_id
            self.enqueue(job, 0.0)
        if callback is not None:
            callback.parents, callback.policy = tuple(j.id for j in jobs), ParentFailure.RUN
            self.enqueue(callback, 0.0)
        ids = [j.id for j in jobs]
        self.batches[batch_id] = MBatch(batch_id, ids, callback.id if callback else None)

    # -------------------------------------------------------------- claim
    def due(self, job: MJob) -> bool:
        return (
            job.status in OPERATIONS[Operation.CLAIM].sources
            and job.due_at is not None
            and job.due_at <= self.t
            and job.queue not in self.paused
            and not is_expired(job.expires_at, self.t)
        )

    def usage(self, queue: str) -> Usage:
        """What ``queue`` uses of its limits now (store.flow_rules.Usage)."""
        limits = self.limits.get(queue, QueueLimits())
        usage = Usage()
        for job in self.jobs.values():
            if job.queue == queue and job.status is S.InProgress:
                usage.running += 1
                if job.limit_key is not None:
                    usage.running_by_key[job.limit_key] = usage.running_by_key.get(job.limit_key, 0) + 1
        for at, key in self.starts.get(queue, []):
            if limits.rate is not None and at > self.t - limits.rate.period_s:
                usage.starts += 1
                usage.first_start = at if usage.first_start is None else min(usage.first_start, at)
            if (
                key is not None
                and limits.per_key_rate is not None
                and at > self.t - limits.per_key_rate.period_s
            ):
                n, first = usage.starts_by_key.get(key, (0, at))
                usage.starts_by_key[key] = (n + 1, min(first, at))
        return usage

    def candidates(self, queue: str, among: Iterable[str] | None = None) -> list[tuple[str, str | None]]:
        """``(id, limit key)`` of the due jobs of ``queue`` (of ``among`` when given)."""
        pool = [self.jobs[i] for i in among] if among is not None else list(self.jobs.values())
        return [(j.id, j.limit_key) for j in pool if j.queue == queue and self.due(j)]

    def room(self, queue: str, among: Iterable[str] | None = None) -> int:
        """How many of those a claim can lease together under the queue's
        limits: ``store.flow_rules.admit`` over them (the count does not depend on
        their order: each limit caps a count of the queue or of one key)."""
        candidates = self.candidates(queue, among)
        limits = self.limits.get(queue, QueueLimits())
        return len(admit(candidates, limits, self.usage(queue), self.t, len(candidates) + 1).leased)

    def admissible(self, queue: str) -> set[str]:
        """The due jobs of ``queue`` no limit holds now (``store.flow_rules.hold``)."""
        limits, usage = self.limits.get(queue, QueueLimits()), self.usage(queue)
        return {i for i, key in self.candidates(queue) if hold(key, limits, usage, self.t) is None}

    def check_claim(self, queues: Sequence[str], wanted: int, got: Sequence[tuple[str, int]]) -> None:
        """Check a claim's answer (``(id, token)`` of each job leased) and
        apply it: every job admissible, the limits kept by the set, and
        fewer than ``wanted`` only when no other job was admissible."""
        ids = [i for i, _ in got]
        assert len(set(ids)) == len(ids), f"a job leased twice: {ids}"
        capacity = 0
        for queue in queues:
            mine = [i for i in ids if i in self.jobs and self.jobs[i].queue == queue]
            capacity += self.room(queue)
            wrong = [self.jobs[i] for i in set(mine) - self.admissible(queue)]
            assert not wrong, (
                f"{queue} at t={self.t}: leased {wrong} not admissible; usage {self.usage(queue)}"
            )
            assert self.room(queue, mine) == len(mine), f"{queue}: the claim's jobs together break a limit"
        assert all(i in self.jobs and self.jobs[i].queue in queues for i in ids), ids
        assert len(ids) == min(wanted, capacity), (
            f"claim of {wanted} returned {len(ids)} with {capacity} admissible (starvation)"
        )
        for job_id, token in got:
            job = self.jobs[job_id]
            job.status, job.token = S.InProgress, job.token + 1
            assert token == job.token, (job_id, token, job.token)
            job.lease_expires_at = self.t + self.lease_ttl_s
            limits = self.limits.get(job.queue, QueueLimits())
            if limits.rate is not None or limits.per_key_rate is not None:
                self.starts.setdefault(job.queue, []).append((self.t, job.limit_key))

    # ------------------------------------------------------------ worker
    def complete(self, job_id: str) -> None:
        job = self.jobs[job_id]
        [job.status] = OPERATIONS[Operation.COMPLETE].targets
        job.error_type, job.lease_expires_at = None, None
        self.ended(job_id)

    def fail(
        self,
        job_id: str,
        permanent: bool,
        error_type: str = HANDLER_ERROR,
        expired: bool = False,
        policy: RetryPolicy | None = None,
        again: RunAgain | None = None,
    ) -> JobStatus:
        """A failed attempt through ``decide_failure``, with ``policy`` (a
        handler's own, as a worker passes it to ``store.fail``) or the store's:
        a nack, a lease expired, or a handler's Retry or Snooze (``again``,
        its error type the attempt's); every Snooze attempt counts, the one
        that fails too."""
        job = self.jobs[job_id]
        decision = decide_failure(
            job.retry_count,
            job.max_retries,
            policy or self.retry,
            permanent=permanent,
            again=again,
            snoozes=job.snoozes,
        )
        assert decision.status in OPERATIONS[Operation.FAIL].targets
        if again is not None:
            error_type = again.error_type
            job.snoozes += again.snooze
        job.status, job.retry_count, job.error_type = decision.status, decision.retry_count, error_type
        job.lease_expires_at = None
        if expired:
            job.lease_expirations += 1
        if decision.delay_s is not None:
            job.due_at = self.t + decision.delay_s
        else:
            self.ended(job_id)
        return decision.status

    def release(self, job_id: str) -> None:
        """A lease given back: due now, retries unchanged (RELEASE's row)."""
        job = self.jobs[job_id]
        [job.status] = OPERATIONS[Operation.RELEASE].targets
        job.due_at, job.lease_expires_at = self.t, None

    def heartbeat(self, job_id: str) -> bool:
        """Renew the lease unless it has expired (a tie has); True when renewed."""
        job = self.jobs[job_id]
        if job.lease_expires_at is None or job.lease_expires_at <= self.t:
            return False
        job.lease_expires_at = self.t + self.lease_ttl_s
        return True

    def expired(self) -> list[str]:
        """InProgress jobs whose lease has expired (a tie is past)."""
        return [
            j.id
            for j in self.jobs.values()
            if j.status is S.InProgress and j.lease_expires_at is not None and j.lease_expires_at <= self.t
        ]

    # ----------------------------------------------------------- operator
    def operator(self, op: Operation, job_id: str, reset_retries: bool = True) -> type[Exception] | None:
        """Apply an operator's ``op``; the error the store must raise, or None."""
        job = self.jobs.get(job_id)
        if job is None:
            return JobNotFound
        row = OPERATIONS[op]
        if job.status not in row.sources:
            return InvalidTransition
        if op in AWAIT_PARENTS:
            parents = [(p, self.jobs[p].status) for p in job.parents if p in self.jobs]
            if unfinished_parent(parents) is not None:
                return ParentUnfinished
        old = job.status
        if op is Operation.DELETE:
            if old not in TERMINAL:
                self.ended(job_id, S.Canceled)
            self.forget(job_id)
            return None
        [job.status] = row.targets
        job.lease_expires_at = None
        if op is Operation.CANCEL:
            if old not in TERMINAL:
                self.ended(job_id)
            return None
        job.due_at = self.t
        if op is Operation.REQUEUE and reset_retries:
            job.retry_count = job.lease_expirations = 0
        return None

    def bulk(self, op: Operation, walk: Sequence[str], read: dict[str, JobStatus]) -> tuple[int, int]:
        """A bulk operation's batch (store/bulk.py ``run_batch``): ``op`` on
        each job of ``walk`` in the store's order (order among them is free,
        as in a claim); one whose status as the batch read it (``read``) is
        outside the sources, or that the operation refuses now (a parent
        unfinished, changed by an earlier one of the batch), is skipped.
        Returns (changed, skipped)."""
        changed = skipped = 0
        for job_id in walk:
            if read[job_id] not in OPERATIONS[op].sources or self.operator(op, job_id) is not None:
                skipped += 1
            else:
                changed += 1
        return changed, skipped

    def forget(self, job_id: str) -> None:
        job = self.jobs.pop(job_id)
        if job.idempotency_key is not None and self.idempotency.get(job.idempotency_key) == job_id:
            del self.idempotency[job.idempotency_key]
        if job.unique_key is not None and self.unique.get(job.unique_key) == job_id:
            del self.unique[job.unique_key]

    def pause(self, queue: str, paused: bool) -> None:
        (self.paused.add if paused else self.paused.discard)(queue)

    # ------------------------------------------------------- dependencies
    def ended(self, job_id: str, outcome: JobStatus | None = None) -> None:
        """Job ``job_id`` ended (``outcome``, default its status): each child
        still waiting for it learns it once (store.flow_rules.on_parent_finished),
        a child canceled by it passes the cancel on."""
        work = [(job_id, outcome or self.jobs[job_id].status)]
        while work:
            parent, ended = work.pop(0)
            for child_id in self.jobs[parent].children if parent in self.jobs else ():
                child = self.jobs.get(child_id)
                if child is None or parent not in child.waiting_on:
                    continue
                child.waiting_on.discard(parent)
                change = on_parent_finished(child.status, child.pending, parent, ended, child.policy)
                if change is None:
                    continue
                child.pending = change.pending
                if change.status is S.Queued:
                    child.status, child.due_at = S.Queued, self.t
                elif change.status is S.Canceled:
                    child.status, child.error_type, child.due_at = S.Canceled, PARENT_FAILED, None
                    child.waiting_on = set()
                    work.append((child_id, S.Canceled))

    # -------------------------------------------------------------- views
    def counts(self, queue: str) -> dict[str, int]:
        """Counts of ``queue`` by status name, statuses with none left out."""
        out: dict[str, int] = {}
        for job in self.jobs.values():
            if job.queue == queue:
                out[job.status.name] = out.get(job.status.name, 0) + 1
        return out

    def listed(self, status: JobStatus, queue: str) -> set[str]:
        return {j.id for j in self.jobs.values() if j.status is status and j.queue == queue}

    def batch_counts(self, batch_id: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for job_id in self.batches[batch_id].job_ids:
            if job_id in self.jobs:
                name = self.jobs[job_id].status.name
                out[name] = out.get(name, 0) + 1
        return out
