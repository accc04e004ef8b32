"""Custom status responses: how ``GET /api/jobs/<id>`` answers.

By default it answers the job JSON. An application can register a factory
that sees the job and returns anything a Flask view may return, e.g. only
``id``/``status``/``result`` for its clients, or an RFC 9457 problem
document for a failed job::

    from webapp.api import set_job_status_response, problem_on_failure
    set_job_status_response(app, problem_on_failure)

The factory runs after authentication and after the job was read; an
exception it raises is answered as any other (a bug is a 500 in the error
envelope, logged).
"""

from __future__ import annotations

from typing import Any

from flask import Flask, current_app

from store.lifecycle import JobStatus
from store.models import Job
from webapp.api.state import StatusResponseFactory, api_state, job_store

PROBLEM_JSON = "application/problem+json"


def set_job_status_response(app: Flask, factory: StatusResponseFactory | None) -> None:
    """Use ``factory(job)`` to answer ``GET /api/jobs/<id>`` on ``app``;
    None restores the default (the job JSON)."""
    api_state(app).status_response = factory


def default_status_response(job: Job) -> dict[str, Any]:
    """The job JSON with its failed ``attempts``, oldest
    first (only here: job lists leave them out)."""
    return {**job.to_json(), "attempts": [a.to_json() for a in job_store().attempts(job.id)]}


def summary_status_response(job: Job) -> dict[str, Any]:
    """Only what a client polling for its result needs."""
    return {"id": job.id, "status": job.status.name, "result": job.result}


def problem_on_failure(job: Job) -> Any:
    """The job JSON, except a Failed job: 500 with an RFC 9457 problem document
    (``application/problem+json``) carrying the job's last error (no traceback)."""
    if job.status is not JobStatus.Failed:
        return job.to_json()
    error = job.error or {}
    problem = {
        "type": "about:blank",
        "title": "Job failed",
        "status": 500,
        "detail": f"{error.get('type') or 'Error'}: {error.get('message') or ''}".rstrip(": "),
        "instance": f"/api/jobs/{job.id}",
        "job_id": job.id,
        "retry_count": job.retry_count,
    }
    response = current_app.json.response(problem)
    response.status_code = 500
    response.mimetype = PROBLEM_JSON
    return response


def job_status_response(job: Job) -> Any:
    """Answer for ``job`` with the app's factory (or the default)."""
    factory = api_state().status_response or default_status_response
    return factory(job)
