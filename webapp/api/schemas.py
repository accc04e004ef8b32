"""Request and response schemas of the JSON API (pydantic v2).

The same models validate requests (through spectree) and describe them in
``/openapi.json``. Request models forbid unknown fields and use the limits
of ``store.models`` so the API refuses what the store would refuse, earlier
and with the field named. JSON bodies are strict (no ``"5"`` for 5, no
``true`` for 1), except that an integral number (``5.0``) is an integer
where the schema says integer, as JSON Schema counts it; query strings are
text, so query models coerce. Response times are ISO 8601 UTC strings,
documented as ``format: date-time``.
"""

from __future__ import annotations

import enum
import typing
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)

from store.base import MAX_PAGE_SIZE
from store.lifecycle import JobStatus
from store.models import (
    MAX_DELAY_S,
    MAX_IDEMPOTENCY_KEY_LEN,
    MAX_NAME_LEN,
    MAX_PRIORITY,
    MAX_QUEUE_LEN,
    MAX_RETRIES_LIMIT,
    MAX_TIMEOUT_S,
    MIN_LEASE_TTL_S,
)
from store.spec import MAX_EPOCH_S

#: Printable text with at least one non-space character, no control characters.
_TEXT = r"^[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f][^\x00-\x1f\x7f]*$"
#: An opaque cursor (url-safe base64).
_CURSOR = r"^[A-Za-z0-9_=-]+$"
#: What a client needs to know of a cursor (store.cursor): opaque, and where it comes from.
CURSOR_FORMAT = (
    "opaque keyset cursor: unpadded url-safe base64 (RFC 4648 section 5) of the JSON array "
    "[last_updated_at, id] of the last job of the previous page; pass a page's next_cursor "
    "back unchanged, with the same filters"
)
#: Largest events page.
MAX_EVENTS_PAGE = 1000

JobName = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_LEN, pattern=_TEXT)]
QueueName = Annotated[str, StringConstraints(min_length=1, max_length=MAX_QUEUE_LEN, pattern=_TEXT)]
STATUS_NAMES = ", ".join(s.name for s in JobStatus)
#: A job status as the API names it (the JSON Schema ``enum`` of the six names).
StatusName = enum.Enum("StatusName", {s.name: s.name for s in JobStatus}, type=str)  # type: ignore[misc]
#: A job status code.
StatusCode = Annotated[int, WithJsonSchema({"type": "integer", "enum": [int(s) for s in JobStatus]})]
#: A status filter in a query: a name or its code; empty means no filter.
StatusQuery = Annotated[
    str,
    WithJsonSchema(
        {
            "type": "string",
            "enum": ["", *(s.name for s in JobStatus), *(str(int(s)) for s in JobStatus)],
            "description": f"one of {STATUS_NAMES}, or its code; empty: every status",
        }
    ),
]
#: A time in a response: ISO 8601 UTC (``2025-01-31T12:00:00.123456Z``).
DateTime = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]


def _moment(value: Any) -> Any:
    """A time in a request: an ISO 8601 text as a datetime, anything else as
    sent. Raises ValueError for a text that is no time; whether it has its
    UTC offset and lies within [0, MAX_EPOCH_S] is the store's one check
    (``store.spec``, a 422 naming the field)."""
    if not isinstance(value, str):
        return value
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("must be an ISO 8601 time with its UTC offset, or epoch seconds") from None


#: A time: ISO 8601 with its UTC offset, or epoch seconds (``_moment``).
Moment = Annotated[
    Any,
    BeforeValidator(_moment),
    WithJsonSchema(
        {
            "oneOf": [
                {"type": "string", "format": "date-time"},
                {"type": "number", "minimum": 0, "maximum": MAX_EPOCH_S},
            ]
        }
    ),
]


def _takes_int(annotation: Any) -> bool:
    return annotation is int or int in typing.get_args(annotation)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    @field_validator("*", mode="before")
    @classmethod
    def _integral(cls, value: Any, info: ValidationInfo) -> Any:
        """``5.0`` where an integer is expected is 5 (``5.5`` stays refused)."""
        integral = isinstance(value, float) and value.is_integer()
        if integral and _takes_int(cls.model_fields[str(info.field_name)].annotation):
            return int(value)
        return value


class _Query(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- requests
#: A job id (UUID, any case).
_UUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"


class EnqueueRequest(_Body):
    """A job to enqueue. Durations are seconds; omitted options take the
    server's defaults (LEASEHOLD_MAX_RETRIES, LEASEHOLD_JOB_TIMEOUT, ...)."""

    name: JobName = Field(description="handler name, e.g. index-source")
    payload: Any = Field(None, description="handler input (any JSON)")
    queue: QueueName = "default"
    priority: int = Field(
        0, ge=-MAX_PRIORITY, le=MAX_PRIORITY, description="higher runs first within a queue"
    )
    max_retries: int | None = Field(None, ge=0, le=MAX_RETRIES_LIMIT)
    timeout_s: float | None = Field(None, ge=0.001, le=MAX_TIMEOUT_S, allow_inf_nan=False)
    lease_ttl_s: float | None = Field(None, ge=MIN_LEASE_TTL_S, le=MAX_TIMEOUT_S, allow_inf_nan=False)
    delay_s: float = Field(0.0, ge=0.0, le=MAX_DELAY_S, allow_inf_nan=False, description="start Scheduled")
    run_at: Moment | None = Field(
        None,
        description="earliest start, by the store's clock: an ISO 8601 time with its UTC offset or "
        "epoch seconds; not with delay_s",
    )
    expires_at: Moment | None = Field(
        None,
        description="a job not started by then never runs: a claim ends it Canceled with error type "
        "Expired (ISO 8601 with its UTC offset, or epoch seconds); not with expires_in_s",
    )
    expires_in_s: float | None = Field(
        None, ge=0.001, le=MAX_DELAY_S, allow_inf_nan=False, description="expires_at as seconds from now"
    )
    unique_for: float | None = Field(
        None,
        ge=0.0,
        le=MAX_DELAY_S,
        allow_inf_nan=False,
        description="a unique job: while a job with its key is Queued, Scheduled or InProgress, "
        "or younger than this many seconds, that job is answered (200) instead of a new one",
    )
    unique_key: (
        Annotated[str, StringConstraints(min_length=1, max_length=MAX_IDEMPOTENCY_KEY_LEN, pattern=_TEXT)]
        | None
    ) = Field(None, description="the unique job's key (default: name and canonical payload)")
    limit_key: (
        Annotated[str, StringConstraints(min_length=1, max_length=MAX_IDEMPOTENCY_KEY_LEN, pattern=_TEXT)]
        | None
    ) = Field(None, description="partition key of the queue's per-key limits (e.g. a customer id)")
    depends_on: list[Annotated[str, StringConstraints(pattern=_UUID)]] | None = Field(
        None,
        max_length=10_000,
        description="ids of jobs this one waits for: Scheduled with no due time until the last finishes",
    )
    on_parent_failure: typing.Literal["cancel", "run"] | None = Field(
        None,
        description="what a failed or canceled parent does: "
        "cancel (default) this job and its dependents, or run it",
    )


class RequeueRequest(_Body):
    """Options of a requeue; the body may be omitted."""

    reset_retries: bool = Field(True, description="set retry_count and lease_expirations to 0")


class ListJobsQuery(_Query):
    """Filters and keyset paging of GET /api/jobs (newest update first)."""

    status: StatusQuery | None = None
    queue: QueueName | None = None
    name: JobName | None = None
    limit: int = Field(50, ge=1, le=MAX_PAGE_SIZE)
    cursor: str | None = Field(
        None, max_length=512, pattern=_CURSOR, description=f"{CURSOR_FORMAT}. Not with before."
    )
    before: str | None = Field(
        None,
        max_length=512,
        pattern=_CURSOR,
        description="prev_cursor of a page: the page before it. Not with cursor.",
    )
    id: str | None = Field(
        None,
        min_length=1,
        max_length=36,
        pattern=r"^[0-9a-fA-F-]+$",
        description="search: part of the job id",
    )
    error: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="search: text of the error (Failed and Scheduled jobs)",
    )
    payload: str | None = Field(
        None,
        min_length=3,
        max_length=500,
        pattern=r"^[^=]+=.*$",
        description="search: key=value, a payload field equal to a JSON value (or that text)",
    )

    @property
    def searching(self) -> bool:
        return bool(self.id or self.error or self.payload)

    @field_validator("status")
    @classmethod
    def _known_status(cls, value: str | None) -> str | None:
        return None if value is None or value == "" else JobStatus.parse(value).name


class EventsQuery(_Query):
    limit: int = Field(200, ge=1, le=MAX_EVENTS_PAGE, description="the last N events")


class RecoveryQuery(_Query):
    dry_run: bool = Field(False, description="preview only: report what would be done, change nothing")


# --------------------------------------------------------------- responses
class ErrorBody(BaseModel):
    code: int
    message: str
    field: str | None = None


class ErrorResponse(BaseModel):
    """Every error: the HTTP status is ``error.code``."""

    error: ErrorBody


class JobError(BaseModel):
    type: str | None = None
    message: str | None = None
    traceback: str | None = None


class ProgressOut(BaseModel):
    fraction: float = Field(ge=0.0, le=1.0)
    message: str | None = None
    at: DateTime


class AttemptOut(BaseModel):
    attempt: int = Field(description="1 for the first run")
    token: int
    worker_id: str | None
    error: JobError | None
    started_at: DateTime | None
    finished_at: DateTime | None


class JobOut(BaseModel):
    """A job. Times are ISO 8601 UTC strings."""

    id: str
    name: str
    queue: str
    status: StatusName
    status_code: StatusCode
    priority: int
    payload: Any = None
    headers: dict[str, str] | None = None
    route_params: dict[str, Any] | None = None
    query_params: dict[str, Any] | None = None
    result: Any = None
    error: JobError | None = None
    retry_count: int
    max_retries: int
    lease_expirations: int
    retry_delay_until: DateTime | None = None
    worker_id: str | None = None
    lease_token: int
    lease_expires_at: DateTime | None = None
    last_heartbeat_at: DateTime | None = None
    timeout_seconds: float
    lease_ttl_seconds: float | None = None
    expires_at: DateTime | None = Field(
        None, description="not started by then: never run (Canceled, Expired)"
    )
    created_at: DateTime | None = None
    started_at: DateTime | None = None
    completed_at: DateTime | None = None
    last_updated_at: DateTime | None = None
    progress: ProgressOut | None = Field(None, description="the last progress the handler reported")
    attempts: list[AttemptOut] | None = Field(
        None, description="failed attempts, oldest first (GET /api/jobs/<id>; absent elsewhere)"
    )


class JobPage(BaseModel):
    items: list[JobOut]
    next_cursor: str | None = Field(
        pattern=_CURSOR, description=f"pass as ?cursor= for the next page; null on the last. {CURSOR_FORMAT}"
    )
    prev_cursor: str | None = Field(
        None, description="pass as ?before= for the previous page; null on the first (and for a search)"
    )
    complete: bool | None = Field(
        None, description="search only: false when the store stopped at its scan limit (scanned jobs)"
    )
    scanned: int | None = Field(None, description="search only: jobs the store examined")


class EventOut(BaseModel):
    job_id: str
    at: DateTime | None
    kind: str
    from_status: StatusName | None
    to_status: StatusName | None
    actor: str | None
    token: int | None
    message: str | None


class EventList(BaseModel):
    items: list[EventOut]


class StatsOut(BaseModel):
    counts: dict[str, int] = Field(description="jobs by status (all six)")
    queues: dict[str, dict[str, int]] = Field(description="jobs by queue, then status")
    expired_leases: int = Field(description="InProgress jobs whose lease expired, awaiting recovery")


class WorkerOut(BaseModel):
    id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    jobs_in_hand: list[str]
    started_at: DateTime | None
    last_seen_at: DateTime | None
    seen_seconds_ago: float | None = Field(description="by the store's clock")
    command: str | None = Field(
        None, description="the operator's command waiting for or taken by it: quiet, stop"
    )
    command_by: str | None = Field(None, description="who sent it (operator:<name>)")


class WorkerList(BaseModel):
    items: list[WorkerOut]


class RecoveredJobOut(BaseModel):
    id: str
    name: str
    queue: str
    worker_id: str | None
    lease_token: int
    retry_count: int
    delay_s: float | None


class RecoveryOut(BaseModel):
    """``recovered``: rescheduled for a retry; ``failed``: retries spent."""

    recovered: list[RecoveredJobOut]
    failed: list[RecoveredJobOut]
    dry_run: bool
    more: bool = Field(description="expired leases remain (the run stopped at its bound)")
    owner: str | None
    duration_ms: float


class HealthOut(BaseModel):
    status: str
