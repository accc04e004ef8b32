"""What every store does the same way before and after its engine: the front
halves of the JobStore operations (validation, chunking, the JSON check of
results, limits and timing of recovery, counters read back as totals).

A store subclasses ``SharedStore`` and implements the engine halves, the
abstract ``_``-methods below, and the record port (store/ports.py), over
which the record-keeping operations are written once (``RegistryRecords``,
``Bookings``); the public operations here are final in spirit (a store
overrides them only to say more in a docstring).
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import orjson

from store.base import MAX_BATCH, MAX_PAGE_SIZE
from store.catalogue import retry_policies
from store.contract_flow import FlowUnsupported
from store.contract_operating import ProgressReport
from store.counters import derived_event_totals, queue_event_totals
from store.errors import JobNotFound, LeaseLost, ValidationError, WorkerStopping
from store.ids import is_whole_id
from store.lifecycle import TERMINAL, EventKind, JobStatus, Operation, RetryPolicy
from store.models import (
    Counts,
    Job,
    JobSpec,
    Page,
    RecoveredJob,
    RecoveryReport,
    as_spec,
    progress_value,
    resolve_times,
    validate_spec,
)
from store.parts import Part
from store.records import UNQUIET, WORKER_COMMANDS, QueueState, WorkerInfo
from store.search import (
    MAX_SCAN_LIMIT,
    SEARCH_SCAN_LIMIT,
    SearchPage,
    SearchQuery,
    matches,
    parse_payload_filter,
)
from store.spec import check_actor, check_queue_name, refuse_nul, scrub_nul, unique_key_of

#: An ack as the engine half takes it: (job id, token, result as JSON text or None).
EncodedAck = tuple[str, int, str | None]
#: A progress report as the engine half takes it: (job id, token, the checked
#: ``{"fraction", "message"}`` of ``progress_value``, without ``at``).
CheckedProgress = tuple[str, int, dict[str, Any]]
#: Most writes of one job whose key's holder vanished or was not known (SharedStore._enqueue_one).
ENQUEUE_ATTEMPTS = 4


def encode_results(acks: Sequence[tuple[str, int, Any]]) -> list[EncodedAck]:
    """Each ack's result as JSON text (None stays None). Raises
    ValidationError naming ``result`` when one is not JSON-serialisable or
    holds a NUL (store.spec: data is refused, never altered); nothing is
    written then."""
    out = []
    for job_id, token, result in acks:
        try:
            text = None if result is None else orjson.dumps(result).decode()
        except TypeError as exc:
            raise ValidationError("result", f"must be JSON-serialisable ({exc})") from None
        refuse_nul("result", text)
        out.append((job_id, token, text))
    return out


def finished_codes(statuses: Collection[JobStatus] | None) -> tuple[int, ...]:
    """Sorted codes of ``statuses`` (default: every TERMINAL status).
    Raises ValidationError naming ``status`` for one that is not finished."""
    chosen = TERMINAL if statuses is None else frozenset(JobStatus(s) for s in statuses)
    if not chosen or not chosen <= TERMINAL:
        names = ", ".join(sorted(s.name for s in TERMINAL))
        raise ValidationError("status", f"purge takes finished statuses only: {names}")
    return tuple(sorted(int(s) for s in chosen))


def _one_at_a_time(spec: JobSpec) -> bool:
    """Whether enqueue_many writes ``spec`` alone: a job that waits for
    parents (its edges are decided one job at a time), or one with flow
    options and an idempotency key (its holder is looked up alone). A job with
    only a limit key or a batch is written with the others of its chunk."""
    return bool(spec.depends_on) or (spec.uses_flow and spec.idempotency_key is not None)


class SharedStore(Part):
    """The shared concrete half of every JobStore."""

    #: Most jobs one ``_insert`` call takes (one atomic unit).
    enqueue_chunk: int = MAX_BATCH

    # ------------------------------------------------------------- enqueue
    def enqueue(self, name: str, payload: Any = None, **options: Any) -> Job:
        return self.enqueue_idempotent(JobSpec(name, payload, **options))[0]

    def enqueue_idempotent(self, spec: JobSpec) -> tuple[Job, bool]:
        [spec] = resolve_times([validate_spec(spec)], self.now)
        if spec.uses_flow and not self.supports_flow:
            raise FlowUnsupported("depends_on" if spec.depends_on else "limit_key")
        return self._enqueue_one(spec)

    def enqueue_many(self, specs: Iterable[JobSpec | tuple[Any, ...]]) -> list[Job]:
        checked = resolve_times([validate_spec(as_spec(item)) for item in specs], self.now)
        if any(spec.uses_flow for spec in checked) and not self.supports_flow:
            raise FlowUnsupported("limit_key")
        if any(unique_key_of(spec) or _one_at_a_time(spec) for spec in checked):
            return [self._enqueue_one(spec)[0] for spec in checked]
        out: list[Job] = []
        for i in range(0, len(checked), self.enqueue_chunk):
            created, _ = self._insert(checked[i : i + self.enqueue_chunk])
            if not created:
                raise ValidationError("idempotency_key", "a key in this batch is already used")
            out.extend(created)
        return out

    def _enqueue_one(self, spec: JobSpec) -> tuple[Job, bool]:
        """One job written (``True``), or the job holding its idempotency or
        unique key (``False``), read by id. Tried again, ENQUEUE_ATTEMPTS
        times at most, when the holder is removed before that read or is not
        known (a concurrent enqueue of the same key won the race); then
        raises JobNotFound, or ValidationError naming the key."""
        holder: str | None = None
        for _ in range(ENQUEUE_ATTEMPTS):
            created, holder = self._insert([spec])
            if created:
                return created[0], True
            if holder:
                try:
                    return self.get(holder), False
                except JobNotFound:
                    continue
        if holder:
            raise JobNotFound(holder)
        field = "idempotency_key" if spec.idempotency_key is not None else "unique_key"
        raise ValidationError(field, "its holder kept changing; try again")

    @abc.abstractmethod
    def _insert(self, specs: Sequence[JobSpec]) -> tuple[list[Job], str | None]:
        """Engine half of every enqueue: write valid ``specs`` (at most
        ``enqueue_chunk``; a spec with a unique key or parents, or with flow
        options and an idempotency key, comes alone) as one atomic unit, in
        order. Returns ``(jobs, None)``; or,
        nothing written, ``([], holder)`` when an idempotency or unique key
        is taken: ``holder`` the id of the job holding it, ``""`` when that
        is not known (a key repeated inside the chunk, or taken by a
        concurrent enqueue). Unique keys and idempotency keys are the
        engine's to enforce atomically."""

    # ---------------------------------------------------------------- acks
    def complete_many(
        self, acks: Sequence[tuple[str, int, Any]], worker_id: str | None = None, *, return_jobs: bool = True
    ) -> list[Job | LeaseLost | None]:
        encoded = encode_results(acks)
        if not encoded:
            return []
        return self._complete(encoded, worker_id, return_jobs)

    @abc.abstractmethod
    def _complete(
        self, acks: Sequence[EncodedAck], worker_id: str | None, return_jobs: bool
    ) -> list[Job | LeaseLost | None]:
        """Engine half of complete_many (results already JSON texts)."""

    # ------------------------------------------------------------ progress
    def report_progress_many(
        self, reports: Sequence[ProgressReport], worker_id: str | None = None
    ) -> list[LeaseLost | None]:
        latest: dict[tuple[str, int], dict[str, Any]] = {}
        for job_id, token, fraction, message in reports:  # all checked before anything is written
            latest[(job_id, token)] = progress_value(fraction, message)
        checked = [(job_id, token, value) for (job_id, token), value in latest.items()]
        outcomes: dict[tuple[str, int], LeaseLost | None] = {}
        for i in range(0, len(checked), MAX_BATCH):
            chunk = checked[i : i + MAX_BATCH]
            answers = self._report_progress(chunk, worker_id)
            outcomes.update(zip(((r[0], r[1]) for r in chunk), answers, strict=True))
        return [outcomes[(r[0], r[1])] for r in reports]

    @abc.abstractmethod
    def _report_progress(
        self, reports: Sequence[CheckedProgress], worker_id: str | None
    ) -> list[LeaseLost | None]:
        """Engine half of report_progress_many: at most MAX_BATCH reports,
        one per (job, token), already checked; one entry per report."""

    # ---------------------------------------------------------------- read
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
        if order not in ("asc", "desc"):
            raise ValidationError("order", "must be asc or desc")
        if not 1 <= limit <= MAX_PAGE_SIZE:
            raise ValidationError("limit", f"must be within [1, {MAX_PAGE_SIZE}]")
        if cursor and before:
            raise ValidationError("before", "give cursor or before, not both")
        ascending = order == "asc"
        if not before:
            return self._list(status, queue, name, limit, cursor, ascending)
        # Backwards: read the other way from ``before``, then turn the page round.
        back = self._list(status, queue, name, limit, before, not ascending)
        if back.next_cursor is None:
            return self._list(status, queue, name, limit, None, ascending)  # reached the start
        return Page(back.items[::-1], back.prev_cursor, back.next_cursor)

    @abc.abstractmethod
    def _list(
        self,
        status: JobStatus | None,
        queue: str | None,
        name: str | None,
        limit: int,
        cursor: str | None,
        ascending: bool,
    ) -> Page:
        """Engine half of list_jobs (``limit`` and order checked): the page
        after ``cursor``, with ``prev_cursor`` the key of its first item when
        a cursor was given (list_jobs reads backwards with it)."""

    def counts(self) -> Counts:
        return Counts.from_counters(self._counter_rows())

    def event_counts(self) -> dict[str, int]:
        """Totals of job events by kind since the store was created (for
        metrics): a kind's ``e:`` total plus its per-queue ``q:`` totals
        (store/counters.py ``derived_event_totals``)."""
        return derived_event_totals(self._counter_rows())

    def queue_event_counts(self) -> dict[tuple[str, str], int]:
        """Totals of history kinds' events by ``(queue, kind)`` (for metrics)."""
        return queue_event_totals(self._counter_rows())

    def count_jobs(self, status: JobStatus, *, queue: str | None = None, name: str | None = None) -> int:
        status = JobStatus(status)
        if not name:
            return int(self.counts().of(queue).get(status.name, 0))
        return self._count_named(status, queue or None, name)

    @abc.abstractmethod
    def _count_named(self, status: JobStatus, queue: str | None, name: str) -> int:
        """Engine half of count_jobs with a name filter (from an index)."""

    @abc.abstractmethod
    def _counter_rows(self) -> Iterable[tuple[str, int | str]]:
        """Every counter as ``(key, total)`` (store/counters.py keys); an
        event of a HISTORY_KINDS kind counted in a ``q:`` total is not
        counted in its ``e:`` total too."""

    # ----------------------------------------------------------- retention
    def purge(
        self, older_than_s: float, limit: int = 1000, statuses: Collection[JobStatus] | None = None
    ) -> int:
        return self._purge(older_than_s, min(limit, MAX_BATCH), finished_codes(statuses))

    def count_purgeable(self, older_than_s: float, statuses: Collection[JobStatus] | None = None) -> int:
        return self._purge(older_than_s, None, finished_codes(statuses))

    @abc.abstractmethod
    def _purge(self, older_than_s: float, limit: int | None, statuses: tuple[int, ...]) -> int:
        """Engine half of purge (``statuses`` checked, as sorted codes): how
        many were deleted; with ``limit`` None, how many would be with no
        limit, deleting nothing (count_purgeable, from an index)."""

    # ------------------------------------------------------------ operator
    def cancel(self, job_id: str, *, actor: str = "operator") -> Job:
        return self._changed(job_id, Operation.CANCEL, actor)

    def requeue(self, job_id: str, *, actor: str = "operator", reset_retries: bool = True) -> Job:
        return self._changed(job_id, Operation.REQUEUE, actor, reset_retries=reset_retries)

    def retry_now(self, job_id: str, *, actor: str = "operator") -> Job:
        return self._changed(job_id, Operation.RETRY_NOW, actor)

    def delete(self, job_id: str, *, actor: str = "operator") -> None:
        self._operator_change(job_id, Operation.DELETE, check_actor(actor), reset_retries=False)

    def _changed(self, job_id: str, op: Operation, actor: str, *, reset_retries: bool = False) -> Job:
        job = self._operator_change(job_id, op, check_actor(actor), reset_retries=reset_retries)
        assert job is not None, "only DELETE leaves no job"
        return job

    @abc.abstractmethod
    def _operator_change(self, job_id: str, op: Operation, actor: str, *, reset_retries: bool) -> Job | None:
        """Engine half of cancel, requeue, retry_now and delete (``actor``
        checked): one atomic change guarded by ``op``'s row of the lifecycle
        table (its sources, target, event, stamps), a parent's waiting
        children settled with it; ``reset_retries`` zeroes retry_count and
        lease_expirations (REQUEUE only). Returns the job, None for DELETE
        (the job removed: see JobStore.delete). Raises JobNotFound,
        InvalidTransition."""

    # ------------------------------------------------------------ recovery
    def recover_expired(self, limit: int | None = None, *, owner: str = "recovery") -> RecoveryReport:
        limit = self._recovery_limit(limit)
        t0 = time.perf_counter()
        done, read = self._recover(limit, owner)
        ms = (time.perf_counter() - t0) * 1000
        return RecoveryReport.from_outcomes(
            done, dry_run=False, more=read >= limit, owner=owner, duration_ms=ms
        )

    def preview_recovery(self, limit: int | None = None) -> RecoveryReport:
        limit = self._recovery_limit(limit)
        t0 = time.perf_counter()
        planned, read = self._recover(limit, None)
        ms = (time.perf_counter() - t0) * 1000
        return RecoveryReport.from_outcomes(
            planned, dry_run=True, more=read >= limit, owner=None, duration_ms=ms
        )

    def expired_lease_count(self) -> int:
        return self._recover(None, None)[1]

    def _handler_policies(self) -> Callable[[str], RetryPolicy]:
        """The retry policy of a job by its handler's name, as the worker
        registry publishes it (store/catalogue.py ``retry_policies``; one
        registry read), ``settings.retry`` for a handler none publishes:
        what recovery decides expired leases with, no worker of the job's
        handler being at hand (docs/architecture.md, "Per-handler retries")."""
        default = self.settings.retry
        found = retry_policies(self.workers(), default)
        return lambda name: found.get(name, default)

    def _recovery_limit(self, limit: int | None) -> int:
        """``limit`` or settings.recovery_batch, at most MAX_BATCH."""
        return min(limit or self.settings.recovery_batch, MAX_BATCH)

    @abc.abstractmethod
    def _recover(self, limit: int | None, owner: str | None) -> tuple[list[RecoveredJob], int]:
        """Engine half of recover_expired: the jobs recovered, and how many
        expired leases it read (at most ``limit``: the batch was full when
        it read ``limit``). With ``owner`` None, preview_recovery's: what it
        would do now, reading only. With ``limit`` None too,
        expired_lease_count's: ``([], how many leases have expired)``, from
        the lease index."""

    # -------------------------------------------------------------- search
    def search_jobs(
        self,
        *,
        id_part: str | None = None,
        error: str | None = None,
        payload: tuple[str, Any] | str | None = None,
        status: JobStatus | None = None,
        queue: str | None = None,
        name: str | None = None,
        limit: int = 50,
        scan_limit: int = SEARCH_SCAN_LIMIT,
    ) -> SearchPage:
        if not 1 <= limit <= MAX_PAGE_SIZE:
            raise ValidationError("limit", f"must be within [1, {MAX_PAGE_SIZE}]")
        if not 1 <= scan_limit <= MAX_SCAN_LIMIT:
            raise ValidationError("scan_limit", f"must be within [1, {MAX_SCAN_LIMIT}]")
        if isinstance(payload, str):
            payload = parse_payload_filter(payload)
        texts = [("id_part", id_part), ("error", error), *(("payload", part) for part in payload or ())]
        for fld, given in texts:
            if isinstance(given, str) and "\x00" in given:  # no store holds one (store/spec.py)
                raise ValidationError(fld, "must not contain NUL characters")
        query = SearchQuery(
            id_part=(id_part or "").strip().lower() or None,
            error=(error or "").strip() or None,
            payload=payload,
            status=None if status is None else JobStatus(status),
            queue=queue or None,
            name=name or None,
        )
        if not query.statuses():
            return SearchPage([], True, 0)  # errors are kept on Failed and Scheduled jobs only
        if query.id_part is not None and is_whole_id(query.id_part):
            return self._search_by_id(query)
        return self._search(query, limit, scan_limit)

    def _search_by_id(self, query: SearchQuery) -> SearchPage:
        """A search whose id part is a whole job id: that job alone, read by
        id and tested against the other criteria (found at any age, unlike
        a scan; ``scanned`` is 1 when it exists)."""
        try:
            job = self.get(query.id_part or "")
        except JobNotFound:
            return SearchPage([], True, 0)
        return SearchPage([job] if matches(job, query) else [], True, 1)

    @abc.abstractmethod
    def _search(self, query: SearchQuery, limit: int, scan_limit: int) -> SearchPage:
        """Engine half of search_jobs (criteria validated and normalised; at
        least one status left to search)."""

    # ---------------------------------------------------------------- queues
    def pause_queue(self, queue: str, *, actor: str = "operator") -> QueueState:
        return self._set_paused(check_queue_name(queue), True, check_actor(actor))

    def resume_queue(self, queue: str, *, actor: str = "operator") -> QueueState:
        return self._set_paused(check_queue_name(queue), False, check_actor(actor))

    @abc.abstractmethod
    def _set_paused(self, queue: str, paused: bool, actor: str) -> QueueState:
        """Engine half of pause_queue and resume_queue (queue and actor checked):
        the state, the audit entry (``queue <name>``) and its count, atomically."""

    # ----------------------------------------------------------------- audit
    def record_audit(self, kind: EventKind, actor: str, message: str) -> None:
        self._record_audit(kind, check_actor(actor), scrub_nul(str(message)))

    def record_action(self, actor: str, action: EventKind, target: str, detail: str | None = None) -> None:
        if not isinstance(target, str) or not target.strip():
            raise ValidationError("target", "must be a non-empty string")
        message = f"{target}: {detail}" if detail else target
        self.record_audit(EventKind(action), actor, message)

    @abc.abstractmethod
    def _record_audit(self, kind: EventKind, actor: str, message: str) -> None:
        """Engine half of record_audit (actor checked, message without NUL)."""

    # --------------------------------------------------------------- workers
    def command_worker(self, worker_id: str, command: str, *, actor: str = "operator") -> WorkerInfo:
        """Leave ``command`` for the worker and record it in the audit log
        (EventKind.WORKER_COMMANDED, message "<command> worker <id>", written
        after the command is stored). Raises ValidationError, WorkerNotFound."""
        if command not in WORKER_COMMANDS:
            raise ValidationError("command", f"must be one of {', '.join(WORKER_COMMANDS)}")
        info = self._command_worker(worker_id, command, check_actor(actor))
        if command == UNQUIET and info.command == "stop":
            raise WorkerStopping(worker_id)
        self.record_audit(EventKind.WORKER_COMMANDED, actor, f"{command} worker {worker_id}")
        return info
