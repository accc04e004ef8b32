"""API views of flow control: a queue's limits, batches, a job's parents
and children.

Registered by ``webapp.api.routes`` (its ROUTES table): GET takes a viewer
token, everything else an operator's, and each change is audited in the
store with the token's actor.
"""

from __future__ import annotations

import uuid
from typing import Any

from flask import Response, url_for
from pydantic import BaseModel, Field
from pydantic import ValidationError as PydanticValidationError

from store.contract_flow import Batch
from store.errors import ValidationError
from store.flow_rules import QueueLimits, parse_limits
from store.models import JobSpec
from store.spec import check_queue_name, resolve_times, validate_spec
from store.times import iso, ts
from webapp.api.auth import current_token
from webapp.api.batch_list import BatchItem
from webapp.api.bodies import read_json_body
from webapp.api.encoding import json_response
from webapp.api.enqueue import request_spec
from webapp.api.errors import APIError, from_pydantic
from webapp.api.schemas import EnqueueRequest
from webapp.api.state import job_store


class RateOut(BaseModel):
    limit: int = Field(description="starts allowed in any window of period_s")
    period_s: float


class LimitsOut(BaseModel):
    """A queue's limits (null: none of that kind) and each one's use now:
    running jobs, running of the busiest key, starts in the window."""

    queue: str
    concurrency: int | None
    per_key_concurrency: int | None
    rate: RateOut | None
    per_key_rate: RateOut | None
    in_use: dict[str, int]
    invalid: str | None = Field(
        None,
        description="what of the stored limits no longer passes the rules (written by an older "
        "version or by hand) and is not applied; a PUT replaces it",
    )


class BatchOut(BatchItem):
    """A batch: a list's item (webapp.api.batch_list) and the ids of its jobs
    (the first BATCH_IDS_SHOWN)."""

    job_ids: list[str] = Field(description="the batch's job ids in order, the first 1,000")


#: Most job ids a batch's JSON lists (`GET /api/jobs?batch_id=` pages through all).
BATCH_IDS_SHOWN = 1000


def batch_json(batch: Batch) -> dict[str, Any]:
    """A batch's API JSON: the store's ``Batch.to_json`` with ``job_ids``
    (at most BATCH_IDS_SHOWN) and ``created_at`` (ISO 8601 UTC)."""
    ids = list(getattr(batch, "job_ids", None) or [])[:BATCH_IDS_SHOWN]
    return {**batch.to_json(), "job_ids": ids, "created_at": iso(ts(batch.created_at))}


class DependenciesOut(BaseModel):
    """A job's parents and (the first 100 of) its children, as job JSON."""

    parents: list[dict[str, Any]]
    children: list[dict[str, Any]]


def _limits_json(queue: str, limits: QueueLimits) -> dict[str, Any]:
    usage = job_store().limit_usage(queue) if limits.any else None
    in_use = usage.in_use(limits) if usage else {}
    return {"queue": queue, **limits.to_json(), "in_use": in_use, "invalid": limits.invalid}


def get_limits(queue: str) -> dict[str, Any]:
    """A queue's limits (null: none of that kind) and how much of each is in
    use. `invalid` names a stored value that no longer passes the rules (it
    is not applied). 422 for a queue name enqueue would refuse."""
    check_queue_name(queue)
    return _limits_json(queue, job_store().queue_limits().get(queue, QueueLimits()))


def set_limits(queue: str) -> dict[str, Any]:
    """Set a queue's limits: `{"concurrency", "per_key_concurrency", "rate":
    {"limit", "period_s"}, "per_key_rate": {...}}`; a key given sets that
    limit, null clears it, a key left out keeps it. Workers see the change at
    their next claim. 422 naming the field. Audited."""
    check_queue_name(queue)
    body = read_json_body()
    if not isinstance(body, dict):
        raise APIError(422, "body: must be a JSON object of limits", "body")
    store = job_store()
    limits = parse_limits(body, store.queue_limits().get(queue))
    return _limits_json(queue, store.set_queue_limits(queue, limits, actor=current_token().actor))


def _body_spec(value: Any, field: str) -> JobSpec:
    """A batch's job (or callback) body as ``POST /api/jobs`` takes it
    (``request_spec``: the handler catalogue's defaults, an unknown name
    refused). Raises APIError 422 naming ``field`` and the body's field:
    the store's own checks that need no clock (``validate_spec``: a naive
    ``run_at``, times that exclude each other) run here too, so a refusal
    names the job; the store checks the spec again when it writes it."""
    try:
        spec = request_spec(EnqueueRequest.model_validate(value))
        validate_spec(spec)
        return spec
    except PydanticValidationError as exc:
        inner = from_pydantic(exc)
        name = f"{field}.{inner.field}" if inner.field and inner.field != "body" else field
        message = str(inner.message).split(": ", 1)[-1]
        raise APIError(422, f"{name}: {message}", name) from None
    except ValidationError as exc:
        raise APIError(422, f"{field}.{exc.field}: {exc.message}", f"{field}.{exc.field}") from None


def _check_times_by_job(specs: list[tuple[str, JobSpec]]) -> None:
    """The checks of a batch's times that need the store's clock
    (``resolve_times``: ``run_at`` at most MAX_DELAY_S away, an expiry after
    the run time) run job by job, so a refusal names the job; one clock
    read, none when no job has a time. Raises APIError 422."""
    if not any(s.needs_clock or s.expires_at is not None for _, s in specs):
        return
    now = job_store().now()
    for field, spec in specs:
        try:
            resolve_times([validate_spec(spec)], lambda: now)
        except ValidationError as exc:
            raise APIError(422, f"{field}.{exc.field}: {exc.message}", f"{field}.{exc.field}") from None


def create_batch() -> Response:
    """Enqueue a batch: `{"jobs": [<POST /api/jobs bodies>], "callback":
    <body> | null}`, all in one atomic unit. The callback waits for every job
    of the batch and runs once all have finished, whatever their outcome
    (its parents' results give the counts). 202 with the batch and `Location`."""
    body = read_json_body()
    if not isinstance(body, dict) or set(body) - {"jobs", "callback"}:
        raise APIError(422, 'body: must be {"jobs": [...], "callback": {...} | null}', "body")
    items = body.get("jobs")
    if not isinstance(items, list) or not items:
        raise APIError(422, "jobs: must be a non-empty list of jobs", "jobs")
    specs = []
    for i, item in enumerate(items):
        spec = _body_spec(item, f"jobs.{i}")
        if spec.depends_on:
            raise ValidationError(f"jobs.{i}.depends_on", "a batch's jobs cannot depend on other jobs")
        specs.append(spec)
    callback = body.get("callback")
    cb = _body_spec(callback, "callback") if callback is not None else None
    _check_times_by_job([(f"jobs.{i}", s) for i, s in enumerate(specs)] + ([("callback", cb)] if cb else []))
    batch = job_store().create_batch(specs, cb)
    response = json_response(batch_json(batch), 202)
    response.headers["Location"] = url_for("api.get_batch", batch_id=batch.id)
    return response


def _batch_id(batch_id: str) -> str:
    try:
        return str(uuid.UUID(batch_id))
    except ValueError:
        raise APIError(404, f"batch {batch_id} not found") from None


def get_batch(batch_id: str) -> dict[str, Any]:
    """A batch: `{"id", "counts": {status: n}, "callback_job_id", "finished",
    "job_ids" (the first 1,000), "created_at"}`."""
    return batch_json(job_store().get_batch(_batch_id(batch_id)))


def cancel_batch(batch_id: str) -> dict[str, Any]:
    """Cancel every unfinished job of a batch and its callback. Audited."""
    return batch_json(job_store().cancel_batch(_batch_id(batch_id), actor=current_token().actor))


def job_dependencies(job_id: uuid.UUID) -> dict[str, Any]:
    """A job's parents and children (the first 100), as job JSON."""
    store = job_store()
    store.get(str(job_id))
    return {
        "parents": [j.to_json() for j in store.parents(str(job_id))],
        "children": [j.to_json() for j in store.children(str(job_id))],
    }
