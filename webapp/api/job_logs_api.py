"""``GET /api/jobs/<id>/logs``: the lines a job's handler logged with
``ctx.log`` (store/job_logs.py), by attempt, after a cursor; registered by
``webapp.api.routes`` (``route_table``), viewer token."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from store.job_logs import MAX_READ, read_logs
from store.times import iso, ts
from webapp.api.common import context_of
from webapp.api.schemas import DateTime
from webapp.api.state import job_store


class LogsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    attempt: int | None = Field(None, ge=1, le=1_000_000, description="one attempt (1 = the first run)")
    after: int = Field(0, ge=0, le=2**62, description="a previous answer's next_after (0: from the start)")
    limit: int = Field(MAX_READ, ge=1, le=MAX_READ)


class LogLineOut(BaseModel):
    attempt: int
    at: DateTime = Field(description="when the handler logged it (the worker's clock)")
    level: str
    message: str


class LogsOut(BaseModel):
    lines: list[LogLineOut]
    next_after: int = Field(description="pass as `after` to read the lines logged since")


def job_logs(job_id: uuid.UUID) -> dict[str, Any]:
    """A job's log lines (`ctx.log`), oldest first: of one `attempt` or all,
    after the cursor `after`; `next_after` reads on from the last line (poll
    it to tail a running job). At most LEASEHOLD_JOB_LOG_LINES lines an
    attempt are kept (the newest). 404 for an unknown job."""
    q: LogsQuery = context_of("query", LogsQuery)
    lines, next_after = read_logs(job_store(), str(job_id), q.attempt, q.after, q.limit)
    return {"lines": [{**line, "at": iso(ts(line["at"]))} for line in lines], "next_after": next_after}


def route_table(
    route: Callable[..., Any], job_rule: str, read: dict[str, Any], error: Any
) -> tuple[Any, ...]:
    """The routes of this module, built with ``webapp.api.routes.Route``."""
    return (
        route(
            f"{job_rule}/logs",
            job_logs,
            query=LogsQuery,
            responses={"HTTP_200": LogsOut, "HTTP_404": error, "HTTP_422": error, **read},
        ),
    )
