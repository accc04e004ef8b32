"""Rows of the SQL store to contract models."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from store.lifecycle import JobStatus
from store.models import Attempt, Job, JobEvent, WorkerInfo, ts


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


def worker_from_row(row: Mapping[str, Any]) -> WorkerInfo:
    """A ``workers`` row as a WorkerInfo."""
    return WorkerInfo(
        id=row["id"],
        host=row["host"],
        pid=row["pid"],
        queues=list(row["queues"]),
        concurrency=row["concurrency"],
        jobs_in_hand=list(row["jobs_in_hand"]),
        started_at=ts(row["started_at"]),
        last_seen_at=ts(row["last_seen_at"]),
        command=row["command"],
        command_by=row["command_by"],
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
