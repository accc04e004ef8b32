"""The JSON API's own views of jobs, recovery, stats, handlers, workers,
metrics and the document: plain functions, listed with their rules and
models in ``webapp.api.routes`` (``ROUTES``), which wraps each with the
app's validator. Views of other surfaces live beside their schemas
(``operating``, ``control``, ``flow``, ``alerts``, ``job_logs``, ``job_wait``)."""

from __future__ import annotations

import os
import socket
import uuid
from typing import Any

from flask import Response, current_app

from store import recovery_run as recovery
from store.catalogue import catalogue
from store.errors import StoreUnavailable
from store.handler_figures import figures
from store.lifecycle import TERMINAL, JobStatus
from webapp import metrics
from webapp.api import control, job_wait
from webapp.api.auth import current_token
from webapp.api.bodies import validated_body
from webapp.api.common import context_of, job_json
from webapp.api.enqueue import enqueue_response, idempotency_key, request_spec
from webapp.api.errors import APIError
from webapp.api.schemas import EnqueueRequest, EventsQuery, ListJobsQuery, RecoveryQuery, RequeueRequest
from webapp.api.state import api_state, job_store
from webapp.api.status_responses import job_status_response
from webapp.search_limit import SEARCH_WINDOW_S, search_wait

#: Most recovery batches one API request runs (each at most LEASEHOLD_RECOVERY_BATCH
#: jobs), so the request has a bound; `more` in the answer says to run again.
RECOVERY_MAX_BATCHES = 20


def healthz() -> tuple[dict[str, Any], int]:
    """Liveness and store reachability: `{"status": "ok"}` 200, or
    `{"status": "unavailable"}` 503 when the store does not answer (why goes to
    the log, never to the caller: a store's error names its host and user).

    The only route that needs no token in the standalone app; mounted in a
    host app with an `authorize` hook, the hook's login (or a token) is needed."""
    try:
        job_store().now()
    except StoreUnavailable as exc:
        current_app.logger.warning("healthz: store unavailable: %s", exc)
        return {"status": "unavailable"}, 503
    return {"status": "ok"}, 200


def enqueue_job() -> Response:
    """Enqueue a job: 202 with the job and `Location`.

    Options the body leaves out take the handler's defaults (queue,
    max_retries, timeout_s) from the catalogue the live workers publish
    (`GET /api/handlers`); an unknown `name` is 422 while that catalogue
    knows any handler. A `traceparent` header is kept in the job's headers.

    `Idempotency-Key`: a replay of the same request answers 202 with the first
    job and its `Location` (nothing written); the key reused for a different
    request (name, queue, payload, priority, max_retries, timeout_s or
    lease_ttl_s differ) is 422. A unique job whose key is held: 200 with the
    job holding it."""
    body = validated_body(EnqueueRequest)
    return enqueue_response(request_spec(body, idempotency_key()))


def list_jobs() -> dict[str, Any]:
    """Jobs, newest update first, filtered by status, queue and name; keyset
    paging both ways (`cursor`, `before`). With `id`, `error` or `payload` a
    search: one page, with `complete` false when the store stopped at its scan
    limit after `scanned` jobs. Searches are limited per token (429 with
    `Retry-After` past the limit)."""
    q: ListJobsQuery = context_of("query", ListJobsQuery)
    status = JobStatus[q.status] if q.status else None
    if q.searching:
        limit = current_app.extensions["leasehold.web"].search_limit
        wait = search_wait(job_store(), "api:" + current_token().digest.hex(), limit)
        if wait:
            raise APIError(
                429,
                f"too many searches: at most {limit} every {SEARCH_WINDOW_S:g} s per token",
                headers={"Retry-After": str(wait)},
            )
        found = job_store().search_jobs(
            id_part=q.id,
            error=q.error,
            payload=q.payload,
            status=status,
            queue=q.queue,
            name=q.name,
            limit=q.limit,
        )
        items = [job.to_json() for job in found.items]
        return {"items": items, "next_cursor": None, "prev_cursor": None, **found.summary()}
    page = job_store().list_jobs(
        status=status, queue=q.queue, name=q.name, limit=q.limit, cursor=q.cursor, before=q.before
    )
    items = [job.to_json() for job in page.items]
    return {"items": items, "next_cursor": page.next_cursor, "prev_cursor": page.prev_cursor}


def get_job(job_id: uuid.UUID) -> Any:
    """A job (the app may shape this answer: see webapp.api.status_responses).
    `wait` (0 to 30 s): answer once the job is finished or that long has
    passed; still running then: `Retry-After: 1` (see webapp.api.job_wait)."""
    q: job_wait.JobQuery = context_of("query", job_wait.JobQuery)
    job = job_wait.wait_for(job_store(), str(job_id), q.wait) if q.wait else job_store().get(str(job_id))
    if not q.wait or job.status in TERMINAL:
        return job_status_response(job)
    response = current_app.make_response(job_status_response(job))
    response.headers["Retry-After"] = str(job_wait.RETRY_AFTER_S)
    return response


def cancel_job(job_id: uuid.UUID) -> Response:
    """Cancel: 200 with the job, 409 when it cannot be canceled. A running
    job's lease is revoked (its worker's heartbeat and ack are refused)."""
    return job_json(job_store().cancel(str(job_id), actor=current_token().actor))


def requeue_job(job_id: uuid.UUID) -> Response:
    """Requeue a Scheduled, Failed or Canceled job: due now; retries reset
    unless `reset_retries` is false. 409 from any other status."""
    body: RequeueRequest = context_of("json", RequeueRequest)
    job = job_store().requeue(str(job_id), actor=current_token().actor, reset_retries=body.reset_retries)
    return job_json(job)


def retry_job(job_id: uuid.UUID) -> Response:
    """Retry a Scheduled or Failed job now, keeping its retry count. 409 from any other status."""
    return job_json(job_store().retry_now(str(job_id), actor=current_token().actor))


def job_events(job_id: uuid.UUID) -> dict[str, Any]:
    """A job's timeline, oldest first (the last `limit` events)."""
    q: EventsQuery = context_of("query", EventsQuery)
    store = job_store()
    store.get(str(job_id))  # 404 for an unknown job, not an empty list
    return {"items": [event.to_json() for event in store.events(str(job_id), limit=q.limit)]}


def run_recovery() -> dict[str, Any]:
    """Recover expired leases now (`?dry_run=1` previews one batch and changes nothing).

    A real run takes the recovery lock, drains in bounded batches (`more` is
    true when leases remain) and is recorded in the recovery history with the
    token's name as its trigger. 409 while another instance holds the lock."""
    q: RecoveryQuery = context_of("query", RecoveryQuery)
    settings = current_app.extensions["leasehold.settings"]
    owner = f"api@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"  # unique per run
    try:
        report = recovery.run_recovery(
            job_store(),
            owner,
            current_token().actor,
            settings.recovery_batch,
            settings.recovery_lock_ttl_s,
            dry_run=q.dry_run,
            max_batches=RECOVERY_MAX_BATCHES,
        )
    except recovery.RecoveryBusy as busy:
        raise APIError(409, str(busy)) from None
    return report.to_json()


def stats() -> dict[str, Any]:
    """Counts by status and by queue, and expired leases awaiting recovery."""
    store = job_store()
    return {**store.counts().to_json(), "expired_leases": store.expired_lease_count()}


def list_handlers() -> dict[str, Any]:
    """The handler catalogue: each handler the live workers serve, with its
    queue and defaults, its retry policy (backoff values null where the
    store's apply; `retry_on`, `give_up_on`), its schedule, the workers
    serving it and its figures (jobs waiting, read from at most 500 jobs,
    `capped` when it reached that; completed and failed in the last hour
    and run time p50/p95, from the handler's minute buckets:
    `GET /api/handlers/<name>/metrics`), by name."""
    store = job_store()
    now_s = store.now()
    entries = catalogue(store).values()
    return {"items": [{**e.to_json(), "figures": figures(store, e.name, now_s).to_json()} for e in entries]}


def list_workers() -> dict[str, Any]:
    """Registered worker processes, most recently seen first, each with an
    operator's command waiting for it (quiet, stop) and who sent it."""
    store = job_store()
    now = store.now()
    return {"items": [control.worker_json(w, now) for w in store.workers()]}


def prometheus_metrics() -> Response:
    """Prometheus text exposition, read from the store at scrape time (viewer token)."""
    from prometheus_client import CONTENT_TYPE_LATEST

    return Response(metrics.render(api_state().metrics), content_type=CONTENT_TYPE_LATEST)


def openapi() -> Response:
    """This API's OpenAPI 3 document, generated from the request and response schemas."""
    return current_app.json.response(api_state().openapi())
