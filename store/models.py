"""Value objects of the JobStore contract: jobs, leases, events, pages, reports.

Times are timezone-aware UTC datetimes; durations are float seconds (``_s``)
or integer milliseconds (``_ms``). Stores build these from their rows; nothing
here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from store.counters import parse_status_key
from store.lifecycle import EventKind, FailureDecision, JobStatus, failure_event_kind

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
    validate_spec as validate_spec,
)


def ts(value: float | None) -> datetime | None:
    """Epoch seconds (store form) to an aware UTC datetime."""
    return None if value is None else datetime.fromtimestamp(value, UTC)


def iso(value: datetime | None) -> str | None:
    """ISO 8601 UTC with a ``Z``, millisecond precision (API form)."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(slots=True)
class Job:
    """A job as DESIGN.md section 2 defines it."""

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

    def to_json(self) -> dict[str, Any]:
        """The API's job JSON: DESIGN field names, ``status`` as its name and
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
        }


def failure_event(decision: FailureDecision, error: dict[str, Any], expired: bool) -> tuple[EventKind, str]:
    """Event kind and message of an applied retry decision (every store
    writes these), e.g. ``(RETRY_SCHEDULED, "ValueError: retry 1 in 2.000s")``."""
    kind = failure_event_kind(decision.status, expired)
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
    """One page of a listing. ``next_cursor`` is opaque; None on the last page."""

    items: list[Job]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class RecoveredJob:
    """One expired lease and what recovery does (or would do) with it."""

    job_id: str
    name: str
    queue: str
    worker_id: str | None
    token: int
    outcome: JobStatus  # Scheduled (retried) or Failed (retries spent)
    retry_count: int
    delay_s: float | None


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What one recovery batch did (or, with ``dry_run``, would do).

    ``recovered``: jobs rescheduled for a retry; ``failed``: jobs whose retries
    were spent. ``more`` is True when the batch was full, so expired leases may
    remain."""

    recovered: list[RecoveredJob]
    failed: list[RecoveredJob]
    dry_run: bool
    more: bool
    owner: str | None = None
    duration_ms: float = 0.0

    @classmethod
    def from_outcomes(
        cls, done: list[RecoveredJob], *, dry_run: bool, more: bool, owner: str | None, duration_ms: float
    ) -> RecoveryReport:
        """Split recovered jobs by outcome (Scheduled: retried; Failed: spent)."""
        return cls(
            recovered=[r for r in done if r.outcome is JobStatus.Scheduled],
            failed=[r for r in done if r.outcome is JobStatus.Failed],
            dry_run=dry_run,
            more=more,
            owner=owner,
            duration_ms=duration_ms,
        )

    def to_json(self) -> dict[str, Any]:
        def one(r: RecoveredJob) -> dict[str, Any]:
            return {
                "id": r.job_id,
                "name": r.name,
                "queue": r.queue,
                "worker_id": r.worker_id,
                "lease_token": r.token,
                "retry_count": r.retry_count,
                "delay_s": r.delay_s,
            }

        return {
            "recovered": [one(r) for r in self.recovered],
            "failed": [one(r) for r in self.failed],
            "dry_run": self.dry_run,
            "more": self.more,
            "owner": self.owner,
            "duration_ms": round(self.duration_ms, 3),
        }


@dataclass(frozen=True, slots=True)
class RecoveryRun:
    """A recorded recovery run (history shown by the console)."""

    id: str
    started_at: datetime
    finished_at: datetime
    owner: str
    trigger: str
    recovered: int
    failed: int
    duration_ms: float

    def to_record(self) -> dict[str, Any]:
        """The run as every store keeps it: times in epoch seconds."""
        return {
            "id": self.id,
            "started_at": self.started_at.timestamp(),
            "finished_at": self.finished_at.timestamp(),
            "owner": self.owner,
            "trigger": self.trigger,
            "recovered": self.recovered,
            "failed": self.failed,
            "duration_ms": self.duration_ms,
        }

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> RecoveryRun:
        """Inverse of ``to_record`` (a mapping with the same keys)."""
        return cls(
            id=r["id"],
            started_at=ts(r["started_at"]),  # type: ignore[arg-type]
            finished_at=ts(r["finished_at"]),  # type: ignore[arg-type]
            owner=r["owner"],
            trigger=r["trigger"],
            recovered=r["recovered"],
            failed=r["failed"],
            duration_ms=r["duration_ms"],
        )


@dataclass(slots=True)
class WorkerInfo:
    """A worker process's registry entry, refreshed by its heartbeat."""

    id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    jobs_in_hand: list[str] = field(default_factory=list)
    started_at: datetime | None = None
    last_seen_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class LockInfo:
    """Holder of a named distributed lock, or None fields when free."""

    name: str
    owner: str | None
    expires_at: datetime | None


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

    def to_json(self) -> dict[str, Any]:
        return {"counts": dict(self.by_status), "queues": {q: dict(c) for q, c in self.by_queue.items()}}


@dataclass(frozen=True, slots=True)
class QueueState:
    """A queue's pause state. ``changed_by`` is the operator who last paused
    or resumed it; a queue never paused is running with None fields."""

    name: str
    paused: bool
    changed_by: str | None = None
    changed_at: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "paused": self.paused,
            "changed_by": self.changed_by,
            "changed_at": iso(self.changed_at),
        }


@dataclass(frozen=True, slots=True)
class MaintenanceRun:
    """One run of a maintenance task (``retention``: jobs pruned;
    ``workers``: dead workers pruned): ``count`` things removed, the run's
    duration and its longest single batch (ms), the lock holder as owner."""

    id: str
    task: str
    started_at: datetime
    finished_at: datetime
    owner: str
    count: int
    duration_ms: float
    longest_batch_ms: float

    def to_record(self) -> dict[str, Any]:
        """The run as every store keeps it: times in epoch seconds."""
        return {
            "id": self.id,
            "task": self.task,
            "started_at": self.started_at.timestamp(),
            "finished_at": self.finished_at.timestamp(),
            "owner": self.owner,
            "count": self.count,
            "duration_ms": self.duration_ms,
            "longest_batch_ms": self.longest_batch_ms,
        }

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> MaintenanceRun:
        """Inverse of ``to_record``."""
        return cls(
            id=r["id"],
            task=r["task"],
            started_at=ts(r["started_at"]),  # type: ignore[arg-type]
            finished_at=ts(r["finished_at"]),  # type: ignore[arg-type]
            owner=r["owner"],
            count=int(r["count"]),
            duration_ms=float(r["duration_ms"]),
            longest_batch_ms=float(r["longest_batch_ms"]),
        )


@dataclass(frozen=True, slots=True)
class Schedule:
    """A periodic job: enqueue ``handler`` on ``queue`` with ``payload`` at
    every tick of ``cron`` (5 fields) in ``timezone`` (IANA name).
    ``catch_up``: after downtime, enqueue the latest missed tick (else skip
    it). ``enabled`` is the operators' switch (kept across restarts);
    ``last_tick_at``/``last_job_id`` are the scheduler's last enqueue."""

    name: str
    handler: str
    cron: str
    timezone: str = "UTC"
    queue: str = "default"
    payload: Any = None
    catch_up: bool = True
    enabled: bool = True
    last_tick_at: datetime | None = None
    last_job_id: str | None = None
