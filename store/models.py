"""Value objects of the JobStore contract: jobs, leases, events, pages, reports.

Times are timezone-aware UTC datetimes; durations are float seconds (``_s``)
or integer milliseconds (``_ms``). Stores build these from their rows; nothing
here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from store.counters import parse_status_key
from store.errors import ValidationError
from store.lifecycle import (
    SNOOZE_ERROR_TYPE,
    UNKNOWN_HANDLER_ERROR_TYPE,
    EventKind,
    FailureDecision,
    JobStatus,
    failure_event_kind,
)
from store.records import (
    BULK_ACTIONS as BULK_ACTIONS,
)
from store.records import (
    WORKER_COMMANDS as WORKER_COMMANDS,
)
from store.records import (
    BulkOperation as BulkOperation,
)

# Re-exported: registry, run-history and operating records live in store/records.py.
from store.records import (
    LockInfo as LockInfo,
)
from store.records import (
    MaintenanceRun as MaintenanceRun,
)
from store.records import (
    QueueState as QueueState,
)
from store.records import (
    RecoveredJob as RecoveredJob,
)
from store.records import (
    RecoveryReport as RecoveryReport,
)
from store.records import (
    RecoveryRun as RecoveryRun,
)
from store.records import (
    Schedule as Schedule,
)
from store.records import (
    WorkerInfo as WorkerInfo,
)

# Re-exported: the enqueue input and its limits live in store/spec.py.
from store.spec import (
    MAX_DELAY_S as MAX_DELAY_S,
)
from store.spec import (
    MAX_IDEMPOTENCY_KEY_LEN as MAX_IDEMPOTENCY_KEY_LEN,
)
from store.spec import (
    MAX_NAME_LEN as MAX_NAME_LEN,
)
from store.spec import (
    MAX_PRIORITY as MAX_PRIORITY,
)
from store.spec import (
    MAX_QUEUE_LEN as MAX_QUEUE_LEN,
)
from store.spec import (
    MAX_RETRIES_LIMIT as MAX_RETRIES_LIMIT,
)
from store.spec import (
    MAX_TIMEOUT_S as MAX_TIMEOUT_S,
)
from store.spec import (
    MIN_LEASE_TTL_S as MIN_LEASE_TTL_S,
)
from store.spec import (
    JobSpec as JobSpec,
)
from store.spec import (
    as_spec as as_spec,
)
from store.spec import (
    resolve_times as resolve_times,
)
from store.spec import (
    scrub_nul,
)
from store.spec import (
    validate_spec as validate_spec,
)
from store.times import iso as iso
from store.times import ts as ts


@dataclass(slots=True)
class Job:
    """A job: its fields, status and lease."""

    id: str
    name: str
    queue: str
    status: JobStatus
    payload: Any
    priority: int = 0
    headers: dict[str, str] | None = None
    route_params: dict[str, Any] | None = None
    query_params: dict[str, Any] | None = None
    result: Any = None
    error: dict[str, Any] | None = None
    retry_count: int = 0
    max_retries: int = 3
    lease_expirations: int = 0
    retry_delay_until: datetime | None = None
    worker_id: str | None = None
    lease_token: int = 0
    lease_expires_at: datetime | None = None
    last_heartbeat_at: datetime | None = None
    timeout_seconds: float = 1800.0
    lease_ttl_seconds: float | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    last_updated_at: datetime | None = None
    idempotency_key: str | None = None
    #: ``{"fraction": 0..1, "message": str | None, "at": epoch seconds}``, or None.
    progress: dict[str, Any] | None = None
    #: Flow control (store/flow_rules.py): the per-key limits' partition key, the
    #: batch or chain the job belongs to, how many of its parents have not
    #: finished (None: it has none) and what a failed parent does to it.
    limit_key: str | None = None
    batch_id: str | None = None
    pending_parents: int | None = None
    on_parent_failure: str | None = None
    #: When a job not started by then is never run (lifecycle.Operation.EXPIRE), or None.
    expires_at: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        """The API's job JSON: the job model's field names, ``status`` as its name and
        ``status_code`` as its number, times ISO 8601 UTC."""
        return {
            "id": self.id,
            "name": self.name,
            "queue": self.queue,
            "status": self.status.name,
            "status_code": int(self.status),
            "priority": self.priority,
            "payload": self.payload,
            "headers": self.headers,
            "route_params": self.route_params,
            "query_params": self.query_params,
            "result": self.result,
            "error": self.error,
            "retry_count": self.retry_count,
            "max_retries": self.max_retries,
            "lease_expirations": self.lease_expirations,
            "retry_delay_until": iso(self.retry_delay_until),
            "worker_id": self.worker_id,
            "lease_token": self.lease_token,
            "lease_expires_at": iso(self.lease_expires_at),
            "last_heartbeat_at": iso(self.last_heartbeat_at),
            "timeout_seconds": self.timeout_seconds,
            "lease_ttl_seconds": self.lease_ttl_seconds,
            "created_at": iso(self.created_at),
            "started_at": iso(self.started_at),
            "completed_at": iso(self.completed_at),
            "last_updated_at": iso(self.last_updated_at),
            "progress": progress_json(self.progress),
            "limit_key": self.limit_key,
            "batch_id": self.batch_id,
            "pending_parents": self.pending_parents,
            "on_parent_failure": self.on_parent_failure,
            "expires_at": iso(self.expires_at),
        }


#: Error types of a Scheduled job put back without spending a retry.
NO_RETRY_SPENT = frozenset({SNOOZE_ERROR_TYPE, UNKNOWN_HANDLER_ERROR_TYPE})


def failure_event(decision: FailureDecision, error: dict[str, Any], expired: bool) -> tuple[EventKind, str]:
    """Event kind and message of an applied retry decision (every store
    writes these), e.g. ``(RETRY_SCHEDULED, "ValueError: retry 1 in 2.000s")``."""
    kind = failure_event_kind(decision.status, expired)
    if decision.status is JobStatus.Scheduled and error.get("type") in NO_RETRY_SPENT:
        return kind, f"{error.get('type')}: due again in {decision.delay_s:.3f}s (no retry spent)"
    if decision.status is JobStatus.Scheduled:
        return kind, f"{error.get('type')}: retry {decision.retry_count} in {decision.delay_s:.3f}s"
    return kind, f"{error.get('type')}: {error.get('message')}"


def lease_expired_error(worker_id: str | None, token: int) -> dict[str, Any]:
    """The error recovery records on a job whose lease expired."""
    message = f"lease of {worker_id} (token {token}) expired"
    return {"type": "LeaseExpired", "message": message, "traceback": None}


def refusal_message(kind: str, actor: str | None, token: int, current_token: int, status: JobStatus) -> str:
    """The job-event message of a refused stale write, e.g. ``completion refused
    by w-3 with token 4; current token 5, status InProgress``. A refusal
    with the current token of an InProgress job means its lease had expired."""
    if current_token == token and status is JobStatus.InProgress:
        return f"{kind.replace('_', ' ')} by {actor or 'a worker'} with token {token}: the lease had expired"
    return (
        f"{kind.replace('_', ' ')} by {actor or 'a worker'} with token {token}; "
        f"current token {current_token}, status {status.name}"
    )


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease a worker holds: the job, its fencing token and when it expires."""

    job_id: str
    token: int
    expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """Outcome of a batched heartbeat: leases renewed (new expiry), leases
    refused (stale token, job canceled or no longer InProgress, lease already
    expired) and leases ``deferred``: still valid but not renewed this time
    because another transaction holds the job's row (PostgreSQL); the worker
    keeps them and renews them at its next beat."""

    renewed: list[Lease]
    refused: list[Lease]
    deferred: list[Lease] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class JobEvent:
    """One entry of a job's timeline. ``actor`` is a worker id or ``operator:<name>``."""

    job_id: str
    at: datetime
    kind: str
    from_status: JobStatus | None
    to_status: JobStatus | None
    actor: str | None
    token: int | None
    message: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "at": iso(self.at),
            "kind": self.kind,
            "from_status": self.from_status.name if self.from_status else None,
            "to_status": self.to_status.name if self.to_status else None,
            "actor": self.actor,
            "token": self.token,
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a listing. ``next_cursor`` is opaque; None on the last page.
    ``prev_cursor`` (pass it as ``before``) reads the page before this one;
    None on the first page."""

    items: list[Job]
    next_cursor: str | None
    prev_cursor: str | None = None


@dataclass(frozen=True, slots=True)
class AuditPage:
    """Operator actions, newest first, and the cursor of the next (older)
    page, None at the end. The cursor is opaque (each store its own)."""

    items: list[JobEvent]
    next_cursor: str | None


#: Longest traceback kept with an attempt's error, characters (the end is kept).
MAX_TRACEBACK_CHARS = 16_000


def progress_json(progress: dict[str, Any] | None) -> dict[str, Any] | None:
    """A stored progress as the API shows it (``at`` as ISO 8601)."""
    if progress is None:
        return None
    return {
        "fraction": progress["fraction"],
        "message": progress.get("message"),
        "at": iso(ts(progress["at"])),
    }


#: Longest progress message, characters.
MAX_PROGRESS_MESSAGE = 500


def progress_value(fraction: float, message: str | None) -> dict[str, Any]:
    """A progress report checked: ``{"fraction", "message"}`` (the store adds
    ``at``), each NUL of the message replaced (``store.spec.scrub_nul``).
    Raises ValidationError naming ``fraction`` or ``message``."""
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0.0 <= fraction <= 1.0:
        raise ValidationError("fraction", "must be a number within [0, 1]")
    if message is not None and (not isinstance(message, str) or len(message) > MAX_PROGRESS_MESSAGE):
        raise ValidationError("message", f"must be text of at most {MAX_PROGRESS_MESSAGE} characters")
    return {"fraction": float(fraction), "message": scrub_nul(message)}


def trimmed_error(error: dict[str, Any]) -> dict[str, Any]:
    """``error`` with its traceback cut to its last MAX_TRACEBACK_CHARS."""
    tb = error.get("traceback")
    if isinstance(tb, str) and len(tb) > MAX_TRACEBACK_CHARS:
        return {**error, "traceback": "…" + tb[-MAX_TRACEBACK_CHARS:]}
    return error


@dataclass(frozen=True, slots=True)
class Attempt:
    """One failed attempt of a job: which (``attempt`` = 1 for the first run),
    under which lease token and worker, its error (type, message, traceback)
    and when it ran. A later failure never hides this one."""

    attempt: int
    token: int
    worker_id: str | None
    error: dict[str, Any] | None
    started_at: datetime | None
    finished_at: datetime | None

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "token": self.token,
            "worker_id": self.worker_id,
            "error": self.error,
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
        }


@dataclass(frozen=True, slots=True)
class Counts:
    """Job counts: ``by_status`` has all six names; ``by_queue`` maps queue to
    counts by status name (statuses with no jobs omitted)."""

    by_status: dict[str, int]
    by_queue: dict[str, dict[str, int]]

    @classmethod
    def from_counters(cls, counters: Iterable[tuple[str, int]]) -> Counts:
        """Counts from the stores' counter keys ``s:<status code>:<queue>``
        (other keys, such as ``e:<event kind>``, are ignored)."""
        by_status = {s.name: 0 for s in JobStatus}
        by_queue: dict[str, dict[str, int]] = {}
        for key, value in counters:
            n, parsed = int(value), parse_status_key(key)
            if parsed is None or not n:
                continue
            status, queue = parsed
            by_status[status.name] += n
            by_queue.setdefault(queue, {})[status.name] = n
        return cls(by_status, by_queue)

    def of(self, queue: str | None) -> dict[str, int]:
        """Counts by status name of ``queue`` (statuses with no jobs omitted),
        or of every queue when ``queue`` is None or empty."""
        return self.by_queue.get(queue, {}) if queue else self.by_status

    def to_json(self) -> dict[str, Any]:
        return {"counts": dict(self.by_status), "queues": {q: dict(c) for q, c in self.by_queue.items()}}
