"""Pydantic schemas of the API's operating routes:
queues, purge, periodic jobs, bulk operations, attempts and worker
commands. The base types and the job schemas are in ``schemas.py``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    WithJsonSchema,
    field_validator,
)

from store.lifecycle import TERMINAL, JobStatus
from store.records import BULK_ACTIONS

#: Printable text with at least one non-space character, no control characters.
from webapp.api.schemas import (
    DateTime,
    JobName,
    QueueName,
    StatusName,
    StatusQuery,
    WorkerOut,
    _Body,
    _Query,
)

#: Statuses retention may prune.
FINISHED_NAMES = ", ".join(s.name for s in sorted(TERMINAL))
#: A finished status: a name or its code.
FinishedStatus = Annotated[
    str,
    WithJsonSchema(
        {
            "type": "string",
            "enum": [*(s.name for s in sorted(TERMINAL)), *(str(int(s)) for s in sorted(TERMINAL))],
        }
    ),
]
#: A bulk operation's action (checked by the view, which names the field).
BulkAction = Annotated[str, WithJsonSchema({"type": "string", "enum": list(BULK_ACTIONS)})]


#: Largest ``older_than`` accepted, seconds (a century).
MAX_AGE_S = 100 * 365 * 86400.0


def _finished(values: list[str] | None) -> list[str] | None:
    if values is None:
        return None
    names = []
    for value in values:
        status = JobStatus.parse(value)
        if status not in TERMINAL:
            raise ValueError(f"{status.name} jobs are never purged; expected {FINISHED_NAMES}")
        names.append(status.name)
    return sorted(set(names))


class PurgeQuery(_Query):
    """``older_than`` and ``status`` may come here or in the body (the body wins)."""

    dry_run: bool = Field(False, description="count only: change nothing")
    older_than: float | None = Field(None, ge=0.0, le=MAX_AGE_S, allow_inf_nan=False)
    status: list[FinishedStatus] | None = Field(None, description=f"repeat for several: {FINISHED_NAMES}")

    @field_validator("status")
    @classmethod
    def _finished_only(cls, value: list[str] | None) -> list[str] | None:
        return _finished(value)


class PurgeRequest(_Body):
    """Without ``older_than``, each status is purged after its own retention
    (LEASEHOLD_RETENTION_COMPLETED, _FAILED, _CANCELED; 0 keeps forever).
    The body may be omitted; its fields win over the query's."""

    dry_run: bool | None = Field(None, description="count only: change nothing (as ?dry_run=1)")
    older_than: float | None = Field(
        None, ge=0.0, le=MAX_AGE_S, allow_inf_nan=False, description="seconds since last update"
    )
    status: list[FinishedStatus] | None = Field(None, description=FINISHED_NAMES)

    @field_validator("status")
    @classmethod
    def _finished_only(cls, value: list[str] | None) -> list[str] | None:
        return _finished(value)


class QueueOut(BaseModel):
    name: str
    paused: bool
    changed_by: str | None = Field(description="who last paused or resumed it (operator:<name>)")
    changed_at: DateTime | None
    counts: dict[str, int] = Field(description="jobs by status (all six)")
    latency_s: float = Field(0.0, description="seconds its oldest Queued job has waited (0: none waiting)")


class QueueList(BaseModel):
    items: list[QueueOut]


class PurgeOut(BaseModel):
    """A real purge answers ``pruned``, a dry run ``would_prune``."""

    pruned: int | None = None
    would_prune: int | None = None
    more: bool = Field(False, description="jobs remain past the request's bound: run it again")


class ScheduleOut(BaseModel):
    name: str
    handler: str
    cron: str
    timezone: str
    queue: str
    payload: Any = None
    catch_up: bool
    description: str = Field(description="the cron expression in words")
    enabled: bool
    next_run_at: DateTime | None = Field(description="null when disabled or invalid")
    last_tick_at: DateTime | None
    last_job_id: str | None
    last_job_status: StatusName | None = Field(description="null when there is none or it was pruned")


class ScheduleList(BaseModel):
    items: list[ScheduleOut]


class HandlerFiguresOut(BaseModel):
    waiting: int = Field(description="Queued jobs")
    completed_last_hour: int
    failed_last_hour: int = Field(description="jobs that ended Failed in the last hour")
    run_p50_s: float | None = Field(description="run time of the jobs completed in the last hour")
    run_p95_s: float | None
    capped: bool = Field(description="waiting reached the 500 jobs read: a lower bound")


class HandlerOut(BaseModel):
    name: str
    queue: str
    max_retries: int | None = Field(description="null: the store's default (LEASEHOLD_MAX_RETRIES)")
    timeout_s: float | None = Field(description="null: the store's default (LEASEHOLD_JOB_TIMEOUT)")
    lease_ttl_s: float | None = Field(description="the serving workers' lease TTL")
    schedule: str | None = Field(description="its cron line, if periodic")
    max_snoozes: int | None
    retry_base_s: float | None = Field(
        description="backoff base, s: delay = min(retry_max_delay_s, retry_base_s * 2**retry_count); "
        "null: the store's default (LEASEHOLD_RETRY_BASE)"
    )
    retry_max_delay_s: float | None = Field(description="s; null: LEASEHOLD_RETRY_MAX_DELAY")
    retry_jitter: float | None = Field(description="fraction in [0, 1]; null: LEASEHOLD_RETRY_JITTER")
    retry_on: list[str] = Field(description="exception types that retry; empty: every one but give_up_on")
    give_up_on: list[str] = Field(description="exception types that fail the job for good at once")
    workers: list[str] = Field(description="ids of the live workers serving it")
    figures: HandlerFiguresOut


class HandlerList(BaseModel):
    items: list[HandlerOut]


class HandlerMetricsQuery(_Query):
    window: Literal["1h", "24h", "7d"] = Field("1h", description="1h, 24h or 7d")


class RunTimeMs(BaseModel):
    p50: float | None
    p95: float | None
    p99: float | None


class HandlerBucket(BaseModel):
    start: int = Field(description="the bucket's start, epoch seconds")
    succeeded: int
    failed: int = Field(description="runs that ended the job Failed")
    retried: int = Field(description="failed runs that scheduled a retry")
    run_time_ms: RunTimeMs = Field(description="run-time percentiles, ms (within 2 %); null without runs")


class HandlerMetricsOut(BaseModel):
    handler: str
    window: str
    buckets: list[HandlerBucket]


# ------------------------------------- bulk operations, attempts, workers
#: ``key=value`` (store/search.py ``parse_payload_filter``): a key with a visible character, and a
#: value that is not a JSON object or array.
_PAYLOAD_FILTER = r"^[^=]*[^=\s][^=]*=\s*([^\s\[{][\s\S]*)?$"
#: A job id as text (a UUID, any case).
JobIdText = Annotated[
    str, Field(pattern=r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
]


class OperationFilter(_Body):
    """Which jobs a bulk operation acts on (every key optional: none is every job);
    the same search as the job list (``error``, ``payload``) and selected ``ids``."""

    status: StatusQuery | None = None
    queue: QueueName | None = None
    name: JobName | None = None
    error: str | None = Field(
        None, min_length=1, max_length=500, pattern=r"\S", description="text of the error (Failed, Scheduled)"
    )
    payload: str | None = Field(
        None,
        max_length=1000,
        pattern=_PAYLOAD_FILTER,
        description="one payload field: key=value (the value read as JSON if it parses; no object or array)",
    )
    ids: list[JobIdText] | None = Field(
        None, min_length=1, max_length=1000, description="job ids, at most 1,000"
    )


class OperationRequest(_Body):
    """A bulk action on every job matching ``filter``, run in the background."""

    action: BulkAction = Field(description="cancel, requeue, retry or delete")
    filter: OperationFilter = Field(default_factory=OperationFilter)
    expected: int | None = Field(
        None,
        ge=0,
        le=2**53,
        description="the count the caller previewed; the server counts again and records its "
        "own count, and refuses (409) a cancel or delete over 1,000 jobs whose count differs",
    )


#: A bulk operation's state.
OperationState = Annotated[
    str, WithJsonSchema({"type": "string", "enum": ["queued", "running", "done", "failed"]})
]

#: How far back GET /api/operations pages (operations, newest first).
MAX_OPERATIONS_LISTED = 1000


class ListOperationsQuery(_Query):
    """Paging of GET /api/operations (newest first)."""

    limit: int = Field(50, ge=1, le=200)
    cursor: str | None = Field(
        None, pattern=r"^[0-9]{1,4}$", description="next_cursor of the page before; omit for the first"
    )


class OperationOut(BaseModel):
    id: str
    action: BulkAction
    filter: dict[str, str]
    actor: str
    expected: int = Field(
        description="the jobs the action applied to when it was started (counted by the server)"
    )
    state: OperationState = Field(description="queued, running, done or failed")
    changed: int
    skipped: int = Field(description="jobs whose status no longer allowed the action")
    progress: float = Field(ge=0.0, le=1.0, description="0.0 to 1.0; 1.0 once done")
    error: str | None
    created_at: DateTime | None
    updated_at: DateTime | None


class OperationPage(BaseModel):
    items: list[OperationOut]
    next_cursor: str | None = Field(description="pass as ?cursor= for the next page; null on the last")


class WorkerCommandOut(WorkerOut):
    """A worker after an operator's command (``command`` and ``command_by`` set)."""
