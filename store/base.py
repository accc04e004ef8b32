"""The JobStore contract every store implements.

Rules every implementation keeps:

* Each operation below is atomic: it changes the job, appends its job event
  and moves the counters together, or changes nothing.
* Every write is guarded by the status it expects (``lifecycle.OPERATIONS``)
  and, for worker writes, by the lease token; when the guard does not match,
  nothing is written and a typed error is raised.
* Lease times come from the store's own clock (``now()``), never the caller's,
  so a worker with a skewed clock cannot expire or keep alive another's lease.
* Lifecycle decisions (legal transitions, the retry decision) are made by
  ``store.lifecycle``; a store never re-decides them.

Errors: JobNotFound, InvalidTransition, LeaseLost, ValidationError,
StoreUnavailable (the store did not answer; every write is safe to retry).
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from typing import Any, Self

from store.contract_flow import FlowContract
from store.contract_operating import OperatingContract, ProgressReport
from store.contract_schema import SchemaContract
from store.defaults import StoreSettings
from store.errors import (
    InvalidTransition,
    JobNotFound,
    LeaseLost,
    StoreError,
    StoreUnavailable,
    ValidationError,
)
from store.lifecycle import JobStatus, RetryPolicy, RunAgain
from store.models import (
    Attempt,
    Counts,
    HeartbeatResult,
    Job,
    JobEvent,
    JobSpec,
    Lease,
    LockInfo,
    Page,
    RecoveredJob,
    RecoveryReport,
    RecoveryRun,
    WorkerInfo,
)
from store.notices import Notice, Wakeups

__all__ = [
    "Counts",
    "HeartbeatResult",
    "InvalidTransition",
    "Job",
    "JobEvent",
    "JobNotFound",
    "JobSpec",
    "JobStore",
    "Lease",
    "LeaseLost",
    "LockInfo",
    "Notice",
    "Page",
    "RecoveredJob",
    "RecoveryReport",
    "RecoveryRun",
    "StoreError",
    "StoreSettings",
    "StoreUnavailable",
    "ValidationError",
    "Wakeups",
    "WorkerInfo",
]


def check_fetch_next(
    acks: Sequence[tuple[str, int, Any]],
    queues: Sequence[Sequence[str]],
    limit: int,
    progress: Sequence[ProgressReport],
) -> None:
    """``complete_and_claim``'s own checks: ValidationError for a progress
    report of no run being acked, or no queue named while ``limit`` > 0."""
    named = {(job_id, token) for job_id, token, _ in acks}
    if any((job_id, token) not in named for job_id, token, _, _ in progress):
        raise ValidationError("progress", "every report must be of a run being acked")
    if limit > 0 and not any(queues):
        raise ValidationError("queues", "name at least one queue")


#: Name of the lock recovery runs under.
RECOVERY_LOCK = "recovery"
#: Largest page ``list_jobs`` returns.
MAX_PAGE_SIZE = 500
#: Largest batch for claim, heartbeat, recovery and enqueue_many chunks.
MAX_BATCH = 1000


class JobStore(abc.ABC):
    """A job store. Thread-safe; open one per process (``store.open_store``).
    What a store does to be operated for months (queues, retention,
    maintenance runs, bulk operations, failure counters, periodic jobs,
    search) is declared in ``store.contract_operating``; flow control (limits,
    dependencies, batches) in ``store.contract_flow``. Both are folded into
    this class (``_fold``) so an engine's classes are few: the engine, its
    plumbing and this port."""

    settings: StoreSettings
    #: Seconds added to the store's clock (0 in production). Tests and drills
    #: move time with it instead of sleeping; it shifts this handle only.
    clock_offset_s: float = 0.0

    # ----------------------------------------------------------------- clock
    @abc.abstractmethod
    def now(self) -> float:
        """The store's clock, epoch seconds (PostgreSQL ``now()``, Redis ``TIME``)."""

    # --------------------------------------------------------------- enqueue
    @abc.abstractmethod
    def enqueue(self, name: str, payload: Any = None, **options: Any) -> Job:
        """Add one job; ``options`` are the fields of JobSpec (queue, priority,
        max_retries, timeout_s, lease_ttl_s, delay_s seconds, headers,
        route_params, query_params, idempotency_key).

        A job with ``delay_s > 0`` starts Scheduled, otherwise Queued. With an
        ``idempotency_key`` already used, returns the first job unchanged
        (check ``created`` via ``enqueue_idempotent``). Raises ValidationError."""

    @abc.abstractmethod
    def enqueue_idempotent(self, spec: JobSpec) -> tuple[Job, bool]:
        """Enqueue ``spec``; returns ``(job, created)``. ``created`` is False when
        ``spec.idempotency_key`` named an existing job, or when ``spec`` is a
        unique job (``unique_key``/``unique_for``, see store.spec) whose key
        is held by a job still Queued, Scheduled or InProgress, or created
        less than its ``unique_for`` seconds ago: that job is returned. The
        check and the insert are one atomic unit on every store."""

    @abc.abstractmethod
    def enqueue_many(self, specs: Iterable[JobSpec | tuple[Any, ...]]) -> list[Job]:
        """Add many jobs, in chunks of at most MAX_BATCH, one round trip (one
        transaction) per chunk. All specs are validated before anything is
        written; each chunk is all-or-nothing. Unique jobs are enqueued one
        at a time (``enqueue_idempotent``): the answer holds the job that
        holds each key. Raises ValidationError."""

    # ------------------------------------------------------------------ read
    @abc.abstractmethod
    def get(self, job_id: str) -> Job:
        """The job. Raises JobNotFound."""

    @abc.abstractmethod
    def list_jobs(
        self,
        *,
        status: JobStatus | None = None,
        queue: str | None = None,
        name: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        order: str = "desc",
        before: str | None = None,
    ) -> Page:
        """Jobs, filtered, newest update first (``order="asc"``: oldest first);
        keyset paging by ``(last_updated_at, id)`` so a page costs the same at
        any depth, exact for every filter on every store. ``cursor`` (a page's
        ``next_cursor``) reads forward; ``before`` (a page's ``prev_cursor``)
        reads the ``limit`` jobs just before it, in the same order, and gives
        the first page when fewer remain. ``limit`` 1..MAX_PAGE_SIZE. Raises
        ValidationError for a bad cursor, limit or order, or both directions."""

    @abc.abstractmethod
    def counts(self) -> Counts:
        """Counts by status and by queue, from maintained counters (not a scan)."""

    @abc.abstractmethod
    def event_counts(self) -> dict[str, int]:
        """Totals of job events by kind (``completed``, ``lease_expired``,
        ``completion_refused``, ...) since the store was created; kept in the
        store so metrics agree across processes."""

    @abc.abstractmethod
    def queue_event_counts(self) -> dict[tuple[str, str], int]:
        """Totals of job events of ``counters.HISTORY_KINDS`` by ``(queue,
        kind)`` since the store was created (or since this counter existed,
        for a store upgraded from 0.2): monotonic, counted in the same atomic
        unit as the change they count, like the history buckets."""

    @abc.abstractmethod
    def history(self, width_s: int, since: float, queue: str | None = None) -> dict[str, dict[float, int]]:
        """Time-bucketed event counts for the history graphs: ``{kind:
        {bucket start (epoch s): n}}`` for the kinds of
        ``counters.HISTORY_KINDS``, buckets of ``width_s`` seconds (60 or
        3600: ``counters.HISTORY_WIDTHS``) from ``since`` on, of one queue or
        all. Written in the same atomic unit as the events they count.
        Raises ValidationError for another width."""

    @abc.abstractmethod
    def handler_minutes(self, name: str, since: float) -> dict[int, dict[str, int]]:
        """Handler ``name``'s minute buckets from ``since`` (epoch s) on:
        ``{minute start (epoch s): {field: n}}``, fields as
        ``store/handler_metrics.py`` names them (outcomes and run-time bins).
        Written in the same atomic unit as the ack or failure they count;
        trimmed with the history (RETENTION_S)."""

    @abc.abstractmethod
    def trim_history(self) -> int:
        """Drop history buckets older than their width's retention (48 h of
        minutes, 30 days of hours); how many rows or fields went."""

    @abc.abstractmethod
    def events(self, job_id: str, limit: int = 200) -> list[JobEvent]:
        """A job's timeline, oldest first (the last ``limit`` events)."""

    def audit(self, limit: int = 100) -> list[JobEvent]:
        """Operator actions (events whose actor starts with ``operator:``),
        newest first, read through an index (not a scan of all events): the
        first ``audit_page`` (nothing for ``limit`` < 1)."""
        return self.audit_page(limit).items if limit >= 1 else []

    @abc.abstractmethod
    def expired_lease_count(self) -> int:
        """InProgress jobs whose lease has expired, awaiting recovery."""

    # ---------------------------------------------------------------- worker
    @abc.abstractmethod
    def claim(
        self, worker_id: str, queues: Sequence[str], limit: int = 1, lease_ttl_s: float | None = None
    ) -> list[Job]:
        """Atomically take up to ``limit`` due jobs (Queued, or Scheduled whose
        ``retry_delay_until`` has passed) from ``queues``, highest priority
        first, then oldest due. Each becomes InProgress with
        ``lease_token += 1``, ``worker_id``, ``lease_expires_at = now + ttl``
        (the job's own ``lease_ttl_seconds`` wins over ``lease_ttl_s``).
        Two callers never receive the same (job, token)."""

    @abc.abstractmethod
    def heartbeat(
        self, worker_id: str, leases: Sequence[Lease], lease_ttl_s: float | None = None
    ) -> HeartbeatResult:
        """Renew many leases in one call: each whose token is current and job
        InProgress gets ``lease_expires_at = now + ttl``; the rest are refused
        (counted and recorded as events) and must be dropped by the worker.

        ``deferred``: leases still valid that were not renewed this time
        because another transaction holds the job's row (PostgreSQL skips
        locked rows rather than wait, so one held row cannot stall a batch);
        the worker keeps them and renews them at its next beat. SQLite and
        Redis serialise writers and never defer."""

    def complete(self, job_id: str, token: int, result: Any = None, worker_id: str | None = None) -> Job:
        """Ack: InProgress -> Completed with ``result`` (JSON). Raises LeaseLost
        (stale token or not InProgress; a refusal event is recorded),
        JobNotFound, ValidationError (result not JSON). One ``complete_many``."""
        [outcome] = self.complete_many([(job_id, token, result)], worker_id=worker_id)
        if isinstance(outcome, LeaseLost):
            if outcome.current_token is None:
                raise JobNotFound(job_id)
            raise outcome
        assert outcome is not None  # return_jobs=True
        return outcome

    @abc.abstractmethod
    def complete_many(
        self, acks: Sequence[tuple[str, int, Any]], worker_id: str | None = None, *, return_jobs: bool = True
    ) -> list[Job | LeaseLost | None]:
        """Ack many jobs at once (one transaction or script call per chunk):
        ``acks`` are ``(job_id, token, result)``.

        Each ack is guarded on its own (InProgress and current token); the
        answer has one entry per ack, in order: the Completed job (None with
        ``return_jobs=False``, which spares reading the jobs back: a worker's
        acks), or the LeaseLost that refused it (a refusal event is recorded).
        A job that no longer exists is refused too (LeaseLost with no current
        token).
        Raises ValidationError (a result not JSON; nothing written)."""

    #: Whether ``complete_and_claim`` acks and claims in one atomic call (a
    #: worker then claims through its acks); else it makes the two calls.
    fetches_next: bool = False

    def complete_and_claim(
        self,
        acks: Sequence[tuple[str, int, Any]],
        worker_id: str,
        queues: Sequence[Sequence[str]],
        limit: int,
        lease_ttl_s: float | None = None,
        progress: Sequence[ProgressReport] = (),
    ) -> tuple[list[LeaseLost | None], list[Job]]:
        """A worker's acks and its next claim (BullMQ's fetch-next): the runs'
        last ``progress`` reports ``(job_id, token, fraction, message)``, each
        of a run in ``acks``, written fenced by its ack (refused with it);
        ``acks`` as ``complete_many(acks, worker_id, return_jobs=False)``; then
        up to ``limit`` jobs (0: none) leased to ``worker_id`` as ``claim``
        does, from the first group of ``queues`` that yields any (a worker's
        weighted turn, then the others). Returns ``(one None or LeaseLost per
        ack, the jobs leased)``. Raises ValidationError (a result not JSON, a
        report of no ack, or no queue named while ``limit`` > 0; nothing
        written). This default makes the calls one after another; a store with
        ``fetches_next`` makes them one atomic call."""
        check_fetch_next(acks, queues, limit, progress)
        if progress:
            self.report_progress_many(progress, worker_id=worker_id)
        outcomes = self.complete_many(acks, worker_id=worker_id, return_jobs=False)
        jobs: list[Job] = []
        for group in queues if limit > 0 else ():
            if group and (jobs := self.claim(worker_id, group, limit, lease_ttl_s)):
                break
        return [o if isinstance(o, LeaseLost) else None for o in outcomes], jobs

    @abc.abstractmethod
    def attempts(self, job_id: str) -> list[Attempt]:
        """Every failed attempt of a job, oldest first: handler errors,
        timeouts and expired leases, each with its own error (traceback cut
        to MAX_TRACEBACK_CHARS), token, worker and times; written with the
        failure in the same atomic unit. Empty for a job that never failed."""

    @abc.abstractmethod
    def fail(
        self,
        job_id: str,
        token: int,
        error: dict[str, Any],
        *,
        permanent: bool = False,
        worker_id: str | None = None,
        again: RunAgain | None = None,
        policy: RetryPolicy | None = None,
    ) -> Job:
        """Nack: the retry decision of ``lifecycle.decide_failure`` applied
        (Scheduled with backoff, or Failed). ``error`` is ``{type, message,
        traceback}``. ``again``: the handler asked to run again (Retry: a
        retry spent, its own delay; Snooze: none spent, counted from the
        job's attempts against ``again.max_snoozes``). ``policy``: the
        backoff of the job's handler (a worker passes
        ``HandlerSpec.retry_policy``); None: ``settings.retry``. Raises
        LeaseLost, JobNotFound."""

    @abc.abstractmethod
    def release(self, job_id: str, token: int, worker_id: str | None = None) -> Job:
        """Give a lease back (graceful shutdown): InProgress -> Scheduled, due
        at once, retries unchanged, not a failure. The next claim bumps the
        token. Raises LeaseLost, JobNotFound."""

    # -------------------------------------------------------------- operator
    @abc.abstractmethod
    def cancel(self, job_id: str, *, actor: str = "operator") -> Job:
        """-> Canceled. A running job's lease is revoked (its heartbeat and ack
        will be refused). Raises InvalidTransition, JobNotFound."""

    @abc.abstractmethod
    def requeue(self, job_id: str, *, actor: str = "operator", reset_retries: bool = True) -> Job:
        """Scheduled, Failed or Canceled -> Queued, due now; ``reset_retries``
        sets retry_count and lease_expirations to 0 (a fresh start).
        Raises InvalidTransition, JobNotFound."""

    @abc.abstractmethod
    def retry_now(self, job_id: str, *, actor: str = "operator") -> Job:
        """Scheduled or Failed -> Queued, due now, retries kept.
        Raises InvalidTransition, JobNotFound."""

    # -------------------------------------------------------------- recovery
    @abc.abstractmethod
    def recover_expired(self, limit: int | None = None, *, owner: str = "recovery") -> RecoveryReport:
        """One bounded batch: up to ``limit`` (settings.recovery_batch)
        InProgress jobs whose lease expired before ``now()`` are failed through
        the retry decision with error type ``LeaseExpired``; ``retry_count`` and
        ``lease_expirations`` +1 for those rescheduled. Each job is changed by a
        compare-and-set on (status, token, expiry), so concurrent recoverers
        recover each job once and a lease renewed meanwhile is left alone.
        Does not take the lock (callers do) and does not record a run."""

    @abc.abstractmethod
    def preview_recovery(self, limit: int | None = None) -> RecoveryReport:
        """What ``recover_expired`` would do now; changes nothing."""

    @abc.abstractmethod
    def record_recovery_run(self, run: RecoveryRun) -> None:
        """Append a run to the recovery history, which keeps the newest
        ``settings.recovery_runs_kept`` runs."""

    @abc.abstractmethod
    def recovery_runs(self, limit: int = 50) -> list[RecoveryRun]:
        """Recovery history, newest first."""

    @abc.abstractmethod
    def delete(self, job_id: str, *, actor: str = "operator") -> None:
        """Remove a job that is not InProgress (cancel a running one first):
        the job, its own events, its idempotency and unique keys, counted
        out of the counters; an audit entry (``deleted``, by ``actor``) is
        kept. Raises InvalidTransition (InProgress), JobNotFound."""

    # -------------------------------------------------------------- wake-ups
    def wakeups(
        self, queues: Sequence[str], worker_id: str | None = None, lease_ttl_s: float | None = None
    ) -> Wakeups | None:
        """A listener for "a job became ready on one of ``queues``" (enqueue),
        so an idle worker claims at once instead of at its next poll; None
        when the store has no such channel (SQLite: workers poll). Notices are
        hints, never the source of truth: one may be lost (a reconnect), and
        a worker still polls, more slowly. With ``worker_id`` (the worker's,
        leases of ``lease_ttl_s`` seconds, default the store's), a store may
        also hand new jobs over to the worker while it waits, leased to it
        (``Notice.leased``; Redis); one that does not ignores both."""
        return None

    def claim_notified(self, worker_id: str, notice: Notice, lease_ttl_s: float | None = None) -> list[Job]:
        """Claim the one job ``notice`` names (``Notice.job``) as ``claim``
        would, in one round trip: an idle worker woken by a notice runs the
        job without first asking which jobs are due; in a queue with limits,
        the job its limits admit next (one), as ``claim`` would. Returns
        ``[]`` when another worker took it first, its queue is paused, or the
        notice names no job (the default, for stores whose notices never do:
        a store whose notices name jobs implements it). After ``[]`` for a
        named job the caller has nothing more to claim for that notice (the
        worker leaves the rest to its idle poll: ``workers/claiming.py``).
        The job is not weighed against other due jobs: it is the newest ready
        one, and an idle worker found none before it."""
        return []

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _fold(port: type[abc.ABC], *contracts: type) -> None:
    """Declare each contract's methods on ``port`` itself (abstract stay abstract)."""
    for contract in contracts:
        for name, value in vars(contract).items():
            if not name.startswith("__") and not name.startswith("_abc") and name not in vars(port):
                setattr(port, name, value)
    abc.update_abstractmethods(port)


_fold(JobStore, FlowContract, OperatingContract, SchemaContract)
