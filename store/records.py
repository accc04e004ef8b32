"""Records of the registry and the run histories: workers, locks, recovery
reports and runs, maintenance runs, paused queues, periodic-job schedules.
Value objects of the JobStore contract, like ``store.models``; no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from store.lifecycle import JobStatus
from store.times import iso, ts


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
    #: An operator's command waiting for (or taken by) the worker: quiet, stop.
    command: str | None = None
    command_by: str | None = None
    #: The handlers it serves, each ``{"name", "queue", "max_retries",
    #: "timeout_s", "lease_ttl_s", "schedule", "max_snoozes"}`` (None where the
    #: handler leaves the store's default; ``schedule`` a cron line or None).
    handlers: list[dict[str, Any]] = field(default_factory=list)


#: Commands an operator can send a worker (``JobStore.command_worker``):
#: quiet stops claiming and finishes what it holds; unquiet takes a pending
#: quiet back (the entry's command is cleared); stop is the graceful SIGTERM
#: path (finish within the grace period, release the rest, exit). Only quiet
#: and stop are ever left pending in the registry.
WORKER_COMMANDS = ("quiet", "unquiet", "stop")
#: The command ``unquiet`` (it clears a pending quiet, it is never stored).
UNQUIET = "unquiet"


@dataclass(frozen=True, slots=True)
class LockInfo:
    """Holder of a named distributed lock, or None fields when free."""

    name: str
    owner: str | None
    expires_at: datetime | None


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


#: Actions a bulk operation can take on every job matching its filter, each
#: the lifecycle operation of the same meaning.
BULK_ACTIONS = ("cancel", "requeue", "retry", "delete")


@dataclass(frozen=True, slots=True)
class BulkOperation:
    """An operator's action on every job matching a filter, run in bounded
    batches in the background (``store.bulk``). ``filter`` has any of
    ``status`` (a name), ``queue``, ``name``. ``expected`` is the count the
    operator saw at preview; ``changed`` jobs were acted on, ``skipped``
    ones no longer allowed it (their status changed since). ``cursor`` is
    where the next batch starts (a keyset cursor of ``list_jobs``); ``state``
    is queued, running, done or failed (``error`` says why)."""

    id: str
    action: str
    filter: dict[str, str]
    actor: str
    expected: int
    state: str = "queued"
    changed: int = 0
    skipped: int = 0
    cursor: str | None = None
    error: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None

    def to_record(self) -> dict[str, Any]:
        """The operation as every store keeps it: times in epoch seconds."""
        return {
            "id": self.id,
            "action": self.action,
            "filter": dict(self.filter),
            "actor": self.actor,
            "expected": self.expected,
            "state": self.state,
            "changed": self.changed,
            "skipped": self.skipped,
            "cursor": self.cursor,
            "error": self.error,
            "created_at": self.created_at.timestamp() if self.created_at else None,
            "updated_at": self.updated_at.timestamp() if self.updated_at else None,
        }

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> BulkOperation:
        """Inverse of ``to_record``."""
        return cls(
            id=r["id"],
            action=r["action"],
            filter=dict(r["filter"] or {}),
            actor=r["actor"],
            expected=int(r["expected"]),
            state=r["state"],
            changed=int(r["changed"]),
            skipped=int(r["skipped"]),
            cursor=r["cursor"],
            error=r["error"],
            created_at=ts(r["created_at"]),
            updated_at=ts(r["updated_at"]),
        )

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed")

    @property
    def progress(self) -> float:
        """0.0 to 1.0: 1.0 once done (also when it changed no job, or fewer
        than counted at preview); before, the share of the count at preview
        acted on or skipped."""
        if self.state == "done":
            return 1.0
        return min(1.0, (self.changed + self.skipped) / self.expected) if self.expected else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "action": self.action,
            "filter": dict(self.filter),
            "actor": self.actor,
            "expected": self.expected,
            "state": self.state,
            "changed": self.changed,
            "skipped": self.skipped,
            "progress": self.progress,
            "error": self.error,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
        }
