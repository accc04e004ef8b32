"""Enqueueing from an HTTP request: idempotency and the 202 answer.

Shared by ``POST /api/jobs`` and the async endpoints.
"""

from __future__ import annotations

import re

from flask import Response, current_app, request, url_for

from store.models import MAX_IDEMPOTENCY_KEY_LEN, JobSpec
from webapp.api.errors import APIError
from webapp.api.state import job_store

IDEMPOTENCY_HEADER = "Idempotency-Key"
_KEY = re.compile(r"^[\x21-\x7e][\x20-\x7e]*$")


def idempotency_key() -> str | None:
    """The request's Idempotency-Key (printable ASCII, at most 200 characters),
    or None. Raises APIError 422 naming the header."""
    raw = request.headers.get(IDEMPOTENCY_HEADER)
    if raw is None:
        return None
    key = raw.strip()
    if not key or len(key) > MAX_IDEMPOTENCY_KEY_LEN or not _KEY.match(key):
        raise APIError(
            422,
            f"{IDEMPOTENCY_HEADER}: must be 1-{MAX_IDEMPOTENCY_KEY_LEN} printable ASCII characters",
            IDEMPOTENCY_HEADER,
        )
    return key


def job_location(job_id: str) -> str:
    return url_for("api.get_job", job_id=job_id)


def enqueue_response(spec: JobSpec) -> Response:
    """Enqueue ``spec``: 202 with the new job and ``Location``; with an
    Idempotency-Key already used for the same job (name, queue, payload),
    200 with the first job and nothing written; used for a different job, 409.
    A unique job (``unique_key``/``unique_for``) whose key is held: 200 with
    the job holding it, whatever its payload."""
    job, created = job_store().enqueue_idempotent(spec)
    by_idempotency = spec.idempotency_key is not None and job.idempotency_key == spec.idempotency_key
    same = (job.name, job.queue, job.payload) == (spec.name, spec.queue, spec.payload)
    if not created and by_idempotency and not same:
        raise APIError(409, f"{IDEMPOTENCY_HEADER} was already used for a different job ({job.id})")
    response = current_app.json.response(job.to_json())
    response.status_code = 202 if created else 200
    response.headers["Location"] = job_location(job.id)
    return response
