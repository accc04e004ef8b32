"""The job lifecycle table: legal transitions between statuses
(store/statuses.py), the operations and what each does, and the retry decision.

Pure: no I/O, no clock, no store imports. Every store asks this module which
statuses an operation may start from and what a failure turns into; a store
only makes the resulting change atomic in its own engine.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from store.backoff import RetryPolicy
from store.errors import InvalidTransition
from store.statuses import EventKind, JobStatus

#: Legal transitions, the lifecycle's law. Anything else is refused.
TRANSITIONS: Final[dict[JobStatus, frozenset[JobStatus]]] = {
    JobStatus.Queued: frozenset(
        {JobStatus.InProgress, JobStatus.Scheduled, JobStatus.Completed, JobStatus.Failed, JobStatus.Canceled}
    ),
    JobStatus.Scheduled: frozenset({JobStatus.Queued, JobStatus.InProgress, JobStatus.Canceled}),
    JobStatus.InProgress: frozenset(
        {JobStatus.Completed, JobStatus.Failed, JobStatus.Scheduled, JobStatus.Canceled}
    ),
    JobStatus.Failed: frozenset({JobStatus.Queued, JobStatus.Scheduled, JobStatus.Canceled}),
    JobStatus.Completed: frozenset({JobStatus.Canceled}),
    JobStatus.Canceled: frozenset({JobStatus.Queued}),
}

#: Statuses a job never leaves on its own (only an operator moves it on).
TERMINAL: Final[frozenset[JobStatus]] = frozenset({JobStatus.Completed, JobStatus.Failed, JobStatus.Canceled})


def is_legal(source: JobStatus, target: JobStatus) -> bool:
    """True when ``source -> target`` is in the transition table."""
    return target in TRANSITIONS[source]


def check_transition(job_id: str, source: JobStatus, target: JobStatus) -> None:
    """Raise InvalidTransition unless ``source -> target`` is legal."""
    if not is_legal(source, target):
        raise InvalidTransition(job_id, source.name, target.name)


class Operation(enum.Enum):
    """The store operations that change a job's status (ENQUEUE: give a new
    job its first)."""

    ENQUEUE = "enqueue"  # a new job: Queued, or Scheduled while its delay runs
    CLAIM = "claim"  # worker takes a due job
    COMPLETE = "complete"  # ack
    FAIL = "fail"  # nack, timeout, lease expiry: through the retry decision
    RELEASE = "release"  # graceful shutdown gives a lease back, due at once
    CANCEL = "cancel"  # operator
    REQUEUE = "requeue"  # operator: back to Queued (retries reset or kept)
    RETRY_NOW = "retry_now"  # operator: due now, retries kept
    DELETE = "delete"  # operator: the job, its events and keys removed (not while InProgress)
    UNBLOCK = "unblock"  # the last parent of a waiting job finished (store/flow_rules.py decides)
    EXPIRE = "expire"  # a claim reached a job past its expires_at (``is_expired``): never run


#: The job fields enqueue writes from its arguments (store/spec.py checks them).
ENQUEUE_WRITES: Final = (
    "id",
    "name",
    "queue",
    "priority",
    "payload",
    "headers",
    "route_params",
    "query_params",
    "max_retries",
    "timeout_seconds",
    "lease_ttl_seconds",
    "idempotency_key",
)


@dataclass(frozen=True, slots=True)
class OperationRule:
    """What an operation does to a job, besides being atomic.

    ``sources``: statuses it may start from (the store's write guard,
    ``status IN sources``). ``targets``: every status it can produce (FAIL
    ends Scheduled or Failed, by ``decide_failure``); every (source, target)
    pair is in TRANSITIONS. ``event``: the kind of the job event it appends
    (FAIL's depends on the decision: ``failure_event_kind``). ``refusal``: the
    event a stale worker write of this operation records instead (None for
    operator operations, which raise InvalidTransition). ``stamps``: job
    fields set to the store's clock; ``clears``: job fields set to null;
    ``writes``: fields it sets from its arguments or the retry decision (each
    store writes those itself; listed so the table says everything an
    operation touches). ``zeroes``: fields set to 0; ``delays``: fields set
    to the clock plus the operation's delay (seconds); ``held``: the same
    while the delay holds the job Scheduled, null otherwise (ENQUEUE's
    ``retry_delay_until``). Every operation also stamps ``last_updated_at``.
    """

    sources: frozenset[JobStatus]
    targets: frozenset[JobStatus]
    event: EventKind | None
    refusal: EventKind | None = None
    stamps: tuple[str, ...] = ()
    clears: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    zeroes: tuple[str, ...] = ()
    delays: tuple[str, ...] = ()
    held: tuple[str, ...] = ()

    @property
    def target(self) -> JobStatus:
        """The one status the operation leads to. Raises ValueError for FAIL,
        whose target is the retry decision's, and DELETE, which has none."""
        if len(self.targets) != 1:
            raise ValueError("this operation has no single target status")
        [to] = self.targets
        return to


#: The one table the stores read to guard and shape their writes: SQL builds
#: its INSERT of new jobs and its guarded UPDATEs from it (store/sql/changes.py),
#: the Redis library has it compiled in (store/redis/scripts.py,
#: ``operations_table``), the console's buttons and bulk actions read its
#: sources. TRANSITIONS is the lifecycle's law; OPERATIONS is how the stores
#: move along it, and uses only pairs TRANSITIONS allows (checked at import).
OPERATIONS: Final[dict[Operation, OperationRule]] = {
    # From no status: a new job, Queued or, while a delay holds it, Scheduled
    # (``enqueue_target``); the job's own fields come from what enqueue takes.
    Operation.ENQUEUE: OperationRule(
        frozenset(),
        frozenset({JobStatus.Queued, JobStatus.Scheduled}),
        EventKind.ENQUEUED,
        stamps=("created_at",),
        writes=ENQUEUE_WRITES,
        zeroes=("retry_count", "lease_expirations", "lease_token"),
        delays=("due_at",),
        held=("retry_delay_until",),
    ),
    Operation.CLAIM: OperationRule(
        frozenset({JobStatus.Queued, JobStatus.Scheduled}),
        frozenset({JobStatus.InProgress}),
        EventKind.CLAIMED,
        stamps=("started_at", "last_heartbeat_at"),
        clears=("retry_delay_until",),
        writes=("worker_id", "lease_token", "lease_expires_at"),
    ),
    Operation.COMPLETE: OperationRule(
        frozenset({JobStatus.InProgress}),
        frozenset({JobStatus.Completed}),
        EventKind.COMPLETED,
        EventKind.COMPLETION_REFUSED,
        stamps=("completed_at",),
        # The error of an earlier failed attempt: its attempts list keeps it.
        clears=("lease_expires_at", "error"),
        writes=("result",),
    ),
    Operation.FAIL: OperationRule(
        frozenset({JobStatus.InProgress}),
        frozenset({JobStatus.Scheduled, JobStatus.Failed}),
        None,
        EventKind.FAILURE_REFUSED,
        clears=("lease_expires_at",),
        writes=("retry_count", "lease_expirations", "error", "retry_delay_until", "due_at", "completed_at"),
    ),
    # A released lease is due at once: InProgress -> Scheduled with no delay
    # (InProgress -> Queued is not a legal transition).
    Operation.RELEASE: OperationRule(
        frozenset({JobStatus.InProgress}),
        frozenset({JobStatus.Scheduled}),
        EventKind.RELEASED,
        EventKind.RELEASE_REFUSED,
        stamps=("due_at", "retry_delay_until"),
        clears=("worker_id", "lease_expires_at"),
    ),
    Operation.CANCEL: OperationRule(
        frozenset(
            {
                JobStatus.Queued,
                JobStatus.Scheduled,
                JobStatus.InProgress,
                JobStatus.Failed,
                JobStatus.Completed,
            }
        ),
        frozenset({JobStatus.Canceled}),
        EventKind.CANCELED,
        stamps=("completed_at",),
        clears=("lease_expires_at",),
    ),
    Operation.REQUEUE: OperationRule(
        frozenset({JobStatus.Scheduled, JobStatus.Failed, JobStatus.Canceled}),
        frozenset({JobStatus.Queued}),
        EventKind.REQUEUED,
        stamps=("due_at",),
        clears=("retry_delay_until", "worker_id", "lease_expires_at", "completed_at"),
        writes=("retry_count", "lease_expirations"),  # reset to 0 when asked
    ),
    Operation.RETRY_NOW: OperationRule(
        frozenset({JobStatus.Scheduled, JobStatus.Failed}),
        frozenset({JobStatus.Queued}),
        EventKind.RETRIED_NOW,
        stamps=("due_at",),
        clears=("retry_delay_until", "worker_id", "lease_expires_at", "completed_at"),
    ),
    # A job waiting for its parents (Scheduled, never due by time) becomes
    # due at once when the last one finishes; store/flow_rules.py decides when. A
    # failed parent cancels it through CANCEL.
    Operation.UNBLOCK: OperationRule(
        frozenset({JobStatus.Scheduled}),
        frozenset({JobStatus.Queued}),
        EventKind.DEPENDENCIES_MET,
        stamps=("due_at",),
        clears=("retry_delay_until",),
        writes=("pending_parents",),
    ),
    # A due job whose expires_at has passed is not leased: the claim that
    # reaches it ends it Canceled with error type Expired (``expiry_error``).
    Operation.EXPIRE: OperationRule(
        frozenset({JobStatus.Queued, JobStatus.Scheduled}),
        frozenset({JobStatus.Canceled}),
        EventKind.EXPIRED,
        stamps=("completed_at",),
        clears=("lease_expires_at",),
        writes=("error",),
    ),
    # No target: the job leaves the store. A running job is canceled first.
    Operation.DELETE: OperationRule(
        frozenset(
            {JobStatus.Queued, JobStatus.Scheduled, JobStatus.Completed, JobStatus.Failed, JobStatus.Canceled}
        ),
        frozenset(),
        EventKind.DELETED,
    ),
}

#: Transitions TRANSITIONS allows that no operation makes yet (kept legal for
#: operators and future operations; checked against OPERATIONS at import).
UNUSED_TRANSITIONS: Final[frozenset[tuple[JobStatus, JobStatus]]] = frozenset(
    {
        (JobStatus.Queued, JobStatus.Completed),
        (JobStatus.Queued, JobStatus.Failed),
        (JobStatus.Queued, JobStatus.Scheduled),
        (JobStatus.Failed, JobStatus.Scheduled),
    }
)


#: Operator operations that make a job due, refused (``errors.ParentUnfinished``)
#: while one of its parents has not finished (is not TERMINAL): the job would
#: run before that parent. A waiting job stays waiting; a canceled or failed
#: one is requeued once its parents have finished.
AWAIT_PARENTS: Final[frozenset[Operation]] = frozenset({Operation.REQUEUE, Operation.RETRY_NOW})


def unfinished_parent(parents: Iterable[tuple[str, JobStatus]]) -> tuple[str, JobStatus] | None:
    """The first parent (by id) of ``(id, status)`` pairs that has not
    finished, or None when every one has (or there are none)."""
    for parent_id, status in sorted(parents):
        if status not in TERMINAL:
            return parent_id, status
    return None


def rule(op: Operation) -> OperationRule:
    """The table's row of ``op``."""
    return OPERATIONS[op]


def target(op: Operation) -> JobStatus:
    """The one status ``op`` leads to (ValueError for FAIL)."""
    return OPERATIONS[op].target


def enqueue_target(delay_s: float) -> JobStatus:
    """ENQUEUE's target for a job due ``delay_s`` seconds after the store's
    clock: Scheduled while a delay (> 0) holds it, else Queued."""
    return JobStatus.Scheduled if delay_s > 0 else JobStatus.Queued


def enqueue_times(now: float, delay_s: float) -> dict[str, float | None]:
    """The times ENQUEUE's row gives a new job, from the store's clock ``now``
    (epoch seconds) and its delay: ``stamps`` and ``last_updated_at`` = now,
    ``delays`` = now + delay, ``held`` = the same when ``enqueue_target`` is
    Scheduled, else None. A store that sets them in its engine returns these."""
    row = OPERATIONS[Operation.ENQUEUE]
    due = now + delay_s
    times: dict[str, float | None] = {field: now for field in (*row.stamps, "last_updated_at")}
    times.update({field: due for field in row.delays})
    held = due if enqueue_target(delay_s) is JobStatus.Scheduled else None
    times.update({field: held for field in row.held})
    return times


#: Error type of a job a claim found past its expires_at (Operation.EXPIRE).
EXPIRED_ERROR_TYPE: Final = "Expired"
#: Its message: the job's ``expires_at`` says when.
EXPIRED_MESSAGE: Final = "not started by its expires_at; never run"


def is_expired(expires_at: float | None, now: float) -> bool:
    """Whether a claim at the store's clock ``now`` (epoch seconds) must
    expire a due job instead of leasing it (Operation.EXPIRE): it has an
    ``expires_at`` (epoch seconds) and ``now`` has reached it. Checked at
    every claim, a retry's too: no attempt starts at or after expires_at.
    The SQL guard and lib/expiry.lua write the same comparison."""
    return expires_at is not None and now >= expires_at


def expiry_error() -> dict[str, str | None]:
    """The error Operation.EXPIRE writes on a job: ``{type, message, traceback}``."""
    return {"type": EXPIRED_ERROR_TYPE, "message": EXPIRED_MESSAGE, "traceback": None}


def failure_event_kind(decision_status: JobStatus, expired: bool) -> EventKind:
    """The event of an applied retry decision: LEASE_EXPIRED for recovery,
    else RETRY_SCHEDULED (Scheduled) or FAILED."""
    if expired:
        return EventKind.LEASE_EXPIRED
    return EventKind.RETRY_SCHEDULED if decision_status is JobStatus.Scheduled else EventKind.FAILED


def sources(op: Operation) -> frozenset[JobStatus]:
    """Statuses ``op`` may start from."""
    return OPERATIONS[op].sources


def source_codes(op: Operation) -> tuple[int, ...]:
    """Wire codes of ``sources(op)``, sorted, for ``status IN (...)`` guards."""
    return tuple(sorted(int(s) for s in OPERATIONS[op].sources))


def check_operation(job_id: str, op: Operation, current: JobStatus) -> None:
    """Raise InvalidTransition when ``op`` may not start from ``current``."""
    row = OPERATIONS[op]
    if current not in row.sources:
        to = min(row.targets).name if row.targets else "deleted"
        raise InvalidTransition(job_id, current.name, to, operation=op.value)


@dataclass(frozen=True, slots=True)
class FailureDecision:
    """What one failure (nack, timeout or expired lease) turns a job into.

    ``delay_s`` is seconds after the store's clock at which a Scheduled job
    becomes due; None when the job ends Failed."""

    status: JobStatus
    retry_count: int
    delay_s: float | None


#: Snoozes a job may take before a further one fails it (Oban's snooze has no cap of its own).
DEFAULT_MAX_SNOOZES: Final = 100
#: Error types a handler's request to run again is recorded with (its failed attempt, the job's error).
RETRY_ERROR_TYPE: Final = "Retry"
SNOOZE_ERROR_TYPE: Final = "Snooze"
#: Error type of a job whose handler the worker that claimed it lacks (given
#: back without spending a retry, like a snooze, until its grace runs out).
UNKNOWN_HANDLER_ERROR_TYPE: Final = "UnknownHandler"


@dataclass(frozen=True, slots=True)
class RunAgain:
    """A handler's request to run again ``after_s`` seconds from now, applied
    through the FAIL operation (fenced by the token like any nack).

    ``snooze=False`` (``raise Retry(after=s)``): spends a retry like any
    failure, but waits ``after_s`` instead of the backoff. ``snooze=True``
    (``raise Snooze(after=s)``): spends none; the job's ``max_snoozes``-th
    snooze is its last, the next one fails the job (error type Snooze), so a
    handler that always snoozes cannot keep a job forever."""

    after_s: float
    snooze: bool = False
    max_snoozes: int = DEFAULT_MAX_SNOOZES

    @property
    def error_type(self) -> str:
        return SNOOZE_ERROR_TYPE if self.snooze else RETRY_ERROR_TYPE


def decide_failure(
    retry_count: int,
    max_retries: int,
    policy: RetryPolicy,
    *,
    permanent: bool = False,
    rng: random.Random | None = None,
    again: RunAgain | None = None,
    snoozes: int = 0,
) -> FailureDecision:
    """The one retry decision, for handler failure, timeout and lease expiry,
    and a handler's request to run again (``again``).

    A failure uses one retry: ``n = retry_count + 1``. If ``n <= max_retries``
    the job becomes Scheduled with ``retry_count = n`` after
    ``policy.delay_s(n)`` (``again.after_s`` for a Retry); otherwise it ends
    Failed with ``retry_count`` left as it was, so ``retry_count <= max_retries``
    always holds (max_retries=3: up to 4 attempts). A permanent error ends
    Failed without using a retry. A snooze (``again.snooze``; ``snoozes``: the
    job's snoozes so far) becomes Scheduled after ``again.after_s`` with
    ``retry_count`` unchanged while ``snoozes < again.max_snoozes``, else Failed.
    """
    if permanent:
        return FailureDecision(JobStatus.Failed, retry_count, None)
    if again is not None and again.snooze:
        if snoozes < again.max_snoozes:
            return FailureDecision(JobStatus.Scheduled, retry_count, again.after_s)
        return FailureDecision(JobStatus.Failed, retry_count, None)
    attempt = retry_count + 1
    if attempt <= max_retries:
        delay = policy.delay_s(attempt, rng) if again is None else again.after_s
        return FailureDecision(JobStatus.Scheduled, attempt, delay)
    return FailureDecision(JobStatus.Failed, retry_count, None)


def count_snoozes(error_types: Iterable[str | None]) -> int:
    """A job's snoozes so far, from the error types of its failed attempts
    (each snooze is recorded as one, type SNOOZE_ERROR_TYPE)."""
    return sum(1 for kind in error_types if kind == SNOOZE_ERROR_TYPE)


def _check_table() -> None:
    """OPERATIONS moves only along TRANSITIONS, and every legal transition is
    either made by an operation or listed in UNUSED_TRANSITIONS."""
    used = set()
    for op, row in OPERATIONS.items():
        for source in row.sources:
            for to in row.targets:
                if not is_legal(source, to):  # pragma: no cover - import-time guard
                    raise AssertionError(f"{op}: {source.name} -> {to.name} is not legal")
                used.add((source, to))
    legal = {(source, to) for source, targets in TRANSITIONS.items() for to in targets}
    if legal - used != UNUSED_TRANSITIONS:  # pragma: no cover - import-time guard
        raise AssertionError(f"transitions no operation makes: {sorted(legal - used)}")


_check_table()
