"""Rows of the SQL store to contract models."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from store.lifecycle import JobStatus, Operation, rule
from store.models import Attempt, Job, JobEvent, ts

#: The JSON columns of ``jobs`` that enqueue sends as JSON texts.
JSON_COLUMNS = ("payload", "headers", "route_params", "query_params")
#: The times the database sets on a new job (its clock).
NEW_JOB_TIMES = ("created_at", "last_updated_at", "due_at", "retry_delay_until")
#: The parameters of ``statements.insert_jobs``: ``SqlStore._row_for``'s keys.
INSERT_JOB_KEYS = (
    "id",
    "name",
    "queue",
    "status",
    "priority",
    *JSON_COLUMNS,
    "max_retries",
    "timeout_seconds",
    "lease_ttl_seconds",
    "idempotency_key",
    "expires_at",
    "delay",
    "delay_until",
)
#: The columns of a new job that enqueue does not set, and those it sets to 0
#: (Operation.ENQUEUE's ``zeroes``).
_NEW_ROW: dict[str, Any] = {
    **dict.fromkeys(rule(Operation.ENQUEUE).zeroes, 0),
    "result": None,
    "error": None,
    "worker_id": None,
    "lease_expires_at": None,
    "last_heartbeat_at": None,
    "started_at": None,
    "completed_at": None,
    "progress": None,
}


def json_texts(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[str | None]]:
    """Each JSON column of job rows (``SqlStore._row_for``) as JSON texts, None
    for SQL NULL: encoded once, sent as they are."""
    return {c: [None if r[c] is None else orjson.dumps(r[c]).decode() for r in rows] for c in JSON_COLUMNS}


def new_jobs(
    rows: Sequence[Mapping[str, Any]], texts: Mapping[str, list[str | None]], stamped: Mapping[str, Any]
) -> list[Job]:
    """The Jobs an enqueue inserted, in ``rows`` order: what the caller sent
    (JSON columns read back from the texts sent, as ``get`` gives them, never
    the caller's objects) with the times the insert returned (``stamped``:
    a row with NEW_JOB_TIMES by job id); every other column empty or zero."""
    return [
        job_from_row(
            {
                **_NEW_ROW,
                **row,
                **{c: None if t[i] is None else orjson.loads(t[i]) for c, t in texts.items()},
                **stamped[row["id"]],
            }
        )
        for i, row in enumerate(rows)
    ]


def job_from_row(row: Mapping[str, Any]) -> Job:
    """A ``jobs`` row (mapping) as a Job."""
    return Job(
        id=row["id"],
        name=row["name"],
        queue=row["queue"],
        status=JobStatus(row["status"]),
        payload=row["payload"],
        priority=row["priority"],
        headers=row["headers"],
        route_params=row["route_params"],
        query_params=row["query_params"],
        result=row["result"],
        error=row["error"],
        retry_count=row["retry_count"],
        max_retries=row["max_retries"],
        lease_expirations=row["lease_expirations"],
        retry_delay_until=ts(row["retry_delay_until"]),
        worker_id=row["worker_id"],
        lease_token=row["lease_token"],
        lease_expires_at=ts(row["lease_expires_at"]),
        last_heartbeat_at=ts(row["last_heartbeat_at"]),
        timeout_seconds=row["timeout_seconds"],
        lease_ttl_seconds=row["lease_ttl_seconds"],
        created_at=ts(row["created_at"]),
        started_at=ts(row["started_at"]),
        completed_at=ts(row["completed_at"]),
        last_updated_at=ts(row["last_updated_at"]),
        idempotency_key=row["idempotency_key"],
        progress=row["progress"],
        limit_key=row.get("limit_key"),
        batch_id=row.get("batch_id"),
        pending_parents=row.get("pending_parents"),
        on_parent_failure=row.get("on_parent_failure"),
        expires_at=ts(row.get("expires_at")),
    )


def event_from_row(row: Mapping[str, Any]) -> JobEvent:
    """A ``job_events`` row as a JobEvent."""
    return JobEvent(
        job_id=row["job_id"],
        at=ts(row["at"]),  # type: ignore[arg-type]
        kind=row["kind"],
        from_status=JobStatus(row["from_status"]) if row["from_status"] is not None else None,
        to_status=JobStatus(row["to_status"]) if row["to_status"] is not None else None,
        actor=row["actor"],
        token=row["token"],
        message=row["message"],
    )


def attempt_from_row(row: Mapping[str, Any]) -> Attempt:
    """An ``attempts`` row as an Attempt."""
    return Attempt(
        attempt=row["attempt"],
        token=row["token"],
        worker_id=row["worker_id"],
        error=row["error"],
        started_at=ts(row["started_at"]),
        finished_at=ts(row["finished_at"]),
    )
