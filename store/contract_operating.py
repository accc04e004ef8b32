"""The JobStore contract, continued: what a store does to be operated for
months — locks and the worker registry, paused queues, retention and maintenance runs,
bulk operations, audit-only entries, failure counters (login throttling),
periodic-job schedules, handlers' progress and search. ``store.base.JobStore`` inherits it; the
rules of ``store.base`` (atomic, guarded, the store's clock) hold here too.
"""

from __future__ import annotations

import abc
from collections.abc import Collection, Sequence
from typing import Any

from store.errors import JobNotFound, LeaseLost
from store.lifecycle import EventKind, JobStatus
from store.models import AuditPage, BulkOperation, LockInfo, MaintenanceRun, QueueState, Schedule, WorkerInfo
from store.search import SEARCH_SCAN_LIMIT, SearchPage

#: Most entries one ``audit_page`` returns.
MAX_AUDIT_PAGE = 1000

#: A progress report: (job id, lease token, fraction in [0, 1], message or None).
ProgressReport = tuple[str, int, float, str | None]


class OperatingContract(abc.ABC):
    """Abstract operations of a store operated for months."""

    # ----------------------------------------------------------------- locks
    @abc.abstractmethod
    def acquire_lock(self, name: str, owner: str, ttl_s: float) -> bool:
        """Take or extend the named lock for ``ttl_s`` seconds. True when
        ``owner`` holds it afterwards (free, expired, or already ours)."""

    @abc.abstractmethod
    def release_lock(self, name: str, owner: str) -> bool:
        """Release the lock if ``owner`` holds it (compare-and-delete)."""

    @abc.abstractmethod
    def lock_info(self, name: str) -> LockInfo:
        """Who holds the named lock, if anyone (expired holders count as none)."""

    # --------------------------------------------------------------- workers
    @abc.abstractmethod
    def worker_heartbeat(self, info: WorkerInfo, *, register: bool = False) -> str | None:
        """Register or refresh a worker process; ``last_seen_at`` is set from
        the store's clock. ``register``: a new process's first beat, which
        clears a command left for an earlier process under the same id (a
        restarted worker does not inherit its predecessor's stop or quiet).
        Returns the operator's command waiting for it (``quiet`` or
        ``stop``, see ``command_worker``), or None."""

    @abc.abstractmethod
    def command_worker(self, worker_id: str, command: str, *, actor: str = "operator") -> WorkerInfo:
        """Leave ``command`` (one of WORKER_COMMANDS) for a registered worker,
        which acts on it at its next registry heartbeat: ``quiet`` stops
        claiming and finishes what it holds, ``stop`` shuts down gracefully
        and the process exits, ``unquiet`` takes back a pending quiet (claims
        resume; nothing changes for a worker that is not quiet). Returns the
        registry entry after the change. Raises WorkerNotFound,
        WorkerStopping (``unquiet`` after a stop), ValidationError (unknown
        command)."""

    @abc.abstractmethod
    def remove_worker(self, worker_id: str) -> None:
        """Drop a worker from the registry (clean exit)."""

    @abc.abstractmethod
    def workers(self) -> list[WorkerInfo]:
        """Registered workers, most recently seen first."""

    # ---------------------------------------------------------------- queues
    @abc.abstractmethod
    def pause_queue(self, queue: str, *, actor: str = "operator") -> QueueState:
        """Pause ``queue``: from now on no claim returns its jobs (decided
        inside the claim, on every store); running jobs finish, enqueue still
        works. Idempotent. Recorded in the audit log."""

    @abc.abstractmethod
    def resume_queue(self, queue: str, *, actor: str = "operator") -> QueueState:
        """Undo ``pause_queue``. Idempotent. Recorded in the audit log."""

    @abc.abstractmethod
    def queue_states(self) -> list[QueueState]:
        """Every queue ever paused or resumed, by name (others are running)."""

    # ------------------------------------------------------------- retention
    @abc.abstractmethod
    def purge(
        self, older_than_s: float, limit: int = 1000, statuses: Collection[JobStatus] | None = None
    ) -> int:
        """Delete up to ``limit`` finished jobs (``statuses``, default every
        TERMINAL one; others are refused with ValidationError) last updated
        more than ``older_than_s`` seconds ago, with their events,
        idempotency and unique keys. Returns how many were deleted. Operator
        actions on them stay in ``audit``."""

    @abc.abstractmethod
    def count_purgeable(self, older_than_s: float, statuses: Collection[JobStatus] | None = None) -> int:
        """How many jobs ``purge`` would delete with no limit (a dry run)."""

    @abc.abstractmethod
    def prune_workers(self, older_than_s: float) -> list[str]:
        """Remove workers whose registry heartbeat is older than
        ``older_than_s`` seconds of the store's clock; their ids."""

    @abc.abstractmethod
    def record_maintenance_run(self, run: MaintenanceRun) -> None:
        """Append a maintenance run; each task keeps its newest
        ``settings.recovery_runs_kept`` runs."""

    @abc.abstractmethod
    def maintenance_runs(self, task: str, limit: int = 20) -> list[MaintenanceRun]:
        """Runs of ``task``, newest first."""

    @abc.abstractmethod
    def record_audit(self, kind: EventKind, actor: str, message: str) -> None:
        """Append an entry about no one job to the audit log (``audit``):
        a bulk operation's start or outcome. Counted like a job event. NULs
        in ``message`` are replaced (store/spec.py). Raises ValidationError
        for an actor longer than MAX_ACTOR_LEN."""

    @abc.abstractmethod
    def record_action(self, actor: str, action: EventKind, target: str, detail: str | None = None) -> None:
        """Record one operator action on no one job in the audit log (``audit``):
        ``action`` an audit-only EventKind (SCHEDULE_ENABLED, SCHEDULE_DISABLED,
        SCHEDULE_RUN, WORKER_FORGOTTEN, JOBS_PURGED, BULK_STARTED,
        BULK_FINISHED, ...), ``actor`` who (``operator:<name>``, at most
        MAX_ACTOR_LEN characters), ``target`` what it acted on, as the
        console shows it (``schedule nightly``, ``worker host.12``,
        ``operation <id>``), and ``detail`` free text (counts, a filter).
        One entry, message ``"<target>: <detail>"`` (``target`` alone
        without detail), NULs replaced; kept for the audit retention
        (``prune_audit``), never pushed out by volume. Raises
        ValidationError (actor, target)."""

    @abc.abstractmethod
    def audit_page(self, limit: int = 100, cursor: str | None = None) -> AuditPage:
        """The audit log, newest first, ``limit`` (1..MAX_AUDIT_PAGE) entries
        after ``cursor`` (a page's ``next_cursor``; None: the newest). A page
        costs the same at any depth (SQL: the partial index by id; Redis: the
        audit zset by time). Raises ValidationError for a bad limit or cursor."""

    @abc.abstractmethod
    def prune_audit(self, older_than_s: float, limit: int = 1000) -> int:
        """Delete up to ``limit`` audit entries written more than
        ``older_than_s`` seconds ago (store clock; LEASEHOLD_RETENTION_AUDIT),
        oldest first; how many went. The audit log is trimmed by age only:
        however many entries are written, none younger is ever dropped."""

    @abc.abstractmethod
    def prune_failures(self, limit: int = 1000) -> int:
        """Delete up to ``limit`` failure counters whose window has closed;
        how many went (0 on Redis, whose counters expire on their own)."""

    # ------------------------------------------------------- bulk operations
    @abc.abstractmethod
    def save_operation(self, operation: BulkOperation) -> BulkOperation:
        """Store a bulk operation (insert or replace by id), stamping
        ``updated_at`` (and ``created_at`` when new) with the store's clock;
        the operation as stored."""

    @abc.abstractmethod
    def get_operation(self, operation_id: str) -> BulkOperation | None:
        """A bulk operation, or None."""

    @abc.abstractmethod
    def operations(self, limit: int = 50, *, unfinished: bool = False) -> list[BulkOperation]:
        """Bulk operations, newest first (only queued and running ones with
        ``unfinished``, oldest first then, the order they are run in)."""

    # ------------------------------------------------------ failure counters
    @abc.abstractmethod
    def record_failure(self, key: str, window_s: float) -> int:
        """Count one failure of ``key`` (e.g. a login's user and address) in
        a fixed window of ``window_s`` seconds of the store's clock, opened by
        the key's first failure; returns the count in the open window. Shared
        by every process on the store (login throttling across gunicorn
        workers). Keys are kept as digests."""

    @abc.abstractmethod
    def failure_count(self, key: str) -> tuple[int, float]:
        """``(failures, seconds until the window closes)`` of ``key``'s open
        window, or ``(0, 0.0)``."""

    @abc.abstractmethod
    def clear_failures(self, key: str) -> None:
        """Forget ``key``'s failures (a success)."""

    # --------------------------------------------------------- periodic jobs
    @abc.abstractmethod
    def save_schedules(self, schedules: Sequence[Schedule]) -> None:
        """Store the declared schedules (upsert by name: handler, cron,
        timezone, queue, payload, catch_up), keeping what operators and the
        scheduler set (enabled, last tick). Schedules not named stay."""

    @abc.abstractmethod
    def schedules(self) -> list[Schedule]:
        """Every stored schedule, by name."""

    @abc.abstractmethod
    def set_schedule_enabled(self, name: str, enabled: bool) -> Schedule:
        """Turn a schedule on or off. Raises ScheduleNotFound."""

    @abc.abstractmethod
    def record_tick(self, name: str, tick_at: float, job_id: str) -> None:
        """Note that ``tick_at`` (epoch seconds) of ``name`` enqueued
        ``job_id``; ``last_tick_at`` only moves forward."""

    # -------------------------------------------------------------- progress
    @abc.abstractmethod
    def report_progress_many(
        self, reports: Sequence[ProgressReport], worker_id: str | None = None
    ) -> list[LeaseLost | None]:
        """Record the progress of many running jobs at once: ``reports`` are
        ``(job_id, token, fraction, message)``, ``fraction`` in [0, 1] and
        ``message`` a short text or None (``store.models.progress_value``).
        Each is written as ``{"fraction", "message", "at"}``, ``at`` the
        store's clock (epoch seconds), only when its job is InProgress with
        that lease token, like a heartbeat; nothing else changes (no event,
        no ``last_updated_at``).

        Every report is guarded on its own; the writes of a chunk (MAX_BATCH,
        Redis SCRIPT_BATCH) are one transaction or script call. A report
        repeated for one (job, token) counts once, the last one winning. The
        answer has one entry per report, in order: None (written), or the
        LeaseLost that refused it, recorded as a PROGRESS_REFUSED event (a job
        that no longer exists: LeaseLost with no current token, no event).
        Raises ValidationError (a bad fraction or message; nothing written)."""

    def report_progress(
        self,
        job_id: str,
        token: int,
        fraction: float,
        message: str | None = None,
        worker_id: str | None = None,
    ) -> None:
        """One report of ``report_progress_many``. Raises LeaseLost (refused,
        recorded as an event), JobNotFound, ValidationError."""
        [refused] = self.report_progress_many([(job_id, token, fraction, message)], worker_id)
        if refused is not None:
            if refused.current_token is None:
                raise JobNotFound(job_id)
            raise refused

    # -------------------------------------------------------------- search
    @abc.abstractmethod
    def count_jobs(self, status: JobStatus, *, queue: str | None = None, name: str | None = None) -> int:
        """How many jobs of ``status`` are in ``queue`` and/or named ``name``:
        exact, from the counters without a name, else from an index (SQL
        ``count(*)`` on the listing's indexes, Redis ``ZCARD``/``ZINTERCARD`` of its
        listing zsets), never by reading jobs: a bulk preview's count."""

    @abc.abstractmethod
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
        """Jobs matching every criterion given, newest update first (store/search.py):
        part of the id, text of the error (Failed and Scheduled jobs), a payload
        field (``(key, value)`` or ``"key=value"``), and the listing filters.
        A store that cannot index a criterion examines at most ``scan_limit``
        jobs and says so (``SearchPage.complete`` False). ``limit``
        1..MAX_PAGE_SIZE. Raises ValidationError for a bad criterion or limit."""
