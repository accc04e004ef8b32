"""The JSON API's routes and their table.

Views are plain functions; ``ROUTES`` says for each its rule, methods, request
models and documented responses, and ``register`` wraps every view with the
app's spectree validator (request validation and ``/openapi.json``) on the
app's blueprint. Authentication is not per view: the blueprint's
``before_request`` refuses every request without a valid token (see auth).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flask import Blueprint, Response, current_app
from pydantic import BaseModel
from spectree import Response as SpecResponse
from spectree import SpecTree

from store import recovery
from store.catalogue import catalogue
from store.errors import StoreUnavailable
from store.handler_figures import figures
from store.lifecycle import TERMINAL, JobStatus
from webapp import metrics
from webapp.api import alerts, batch_list, control, flow, job_logs, job_wait
from webapp.api import operating as ops
from webapp.api.auth import READ_METHODS, current_token
from webapp.api.bodies import validated_body
from webapp.api.common import context_of, job_json
from webapp.api.direct import direct
from webapp.api.enqueue import enqueue_response, idempotency_key, request_spec
from webapp.api.errors import APIError
from webapp.api.schemas import (
    EnqueueRequest,
    ErrorResponse,
    EventList,
    EventsQuery,
    HealthOut,
    JobOut,
    JobPage,
    ListJobsQuery,
    RecoveryOut,
    RecoveryQuery,
    RequeueRequest,
    StatsOut,
    WorkerList,
)
from webapp.api.schemas_operating import (
    HandlerList,
    ListOperationsQuery,
    OperationOut,
    OperationPage,
    OperationRequest,
    PurgeOut,
    PurgeQuery,
    PurgeRequest,
    QueueList,
    QueueOut,
    ScheduleList,
    ScheduleOut,
    WorkerCommandOut,
)
from webapp.api.state import api_state, job_store
from webapp.api.status_responses import job_status_response
from webapp.search_limit import SEARCH_WINDOW_S, search_wait

JOB = "/api/jobs/<uuid:job_id>"
QUEUE = "/api/queues/<path:queue>"
PERIODIC = "/api/periodic/<path:name>"
#: Most recovery batches one API request runs (each at most LEASEHOLD_RECOVERY_BATCH
#: jobs), so the request has a bound; `more` in the answer says to run again.
RECOVERY_MAX_BATCHES = 20
E = ErrorResponse


# ------------------------------------------------------------------ views
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
    queue and defaults, its schedule, the workers serving it and its figures
    (jobs waiting; completed and failed in the last hour, run time p50/p95;
    each read from at most 500 jobs, `capped` when a count reached that), by name."""
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


# ------------------------------------------------------------------ table
@dataclass(frozen=True, slots=True)
class Route:
    rule: str
    view: Callable[..., Any]
    methods: tuple[str, ...] = ("GET",)
    query: type[BaseModel] | None = None
    json: type[BaseModel] | None = None
    responses: dict[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ("jobs",)
    anonymous: bool = False
    #: Enqueues a job from the request (documents Idempotency-Key and Location).
    enqueues: bool = False


_READ = {"HTTP_401": E, "HTTP_503": E}
_ACT = {"HTTP_401": E, "HTTP_403": E, "HTTP_404": E, "HTTP_409": E, "HTTP_503": E}
_BODY = {"HTTP_400": E, "HTTP_413": E, "HTTP_415": E}
_OPS = ("ops",)
_QUEUES = ("queues",)
_RETENTION = ("retention",)
_PERIODIC = ("periodic",)
_OPERATIONS = ("operations",)
_FLOW = ("batches",)

ROUTES: tuple[Route, ...] = (
    Route(
        "/healthz",
        healthz,
        responses={"HTTP_200": HealthOut, "HTTP_503": HealthOut},
        tags=_OPS,
        anonymous=True,
    ),
    Route(
        "/api/jobs",
        enqueue_job,
        ("POST",),
        json=EnqueueRequest,
        responses={
            "HTTP_202": (JobOut, "Accepted: the new job, or the job of a replayed Idempotency-Key"),
            "HTTP_200": (JobOut, "a unique job whose key is held: the job holding it"),
            **_ACT,
            **_BODY,
        },
        enqueues=True,
    ),
    Route(
        "/api/jobs", list_jobs, query=ListJobsQuery, responses={"HTTP_200": JobPage, "HTTP_429": E, **_READ}
    ),
    Route(
        JOB,
        get_job,
        query=job_wait.JobQuery,
        responses={"HTTP_200": None, "HTTP_404": E, "HTTP_422": E, **_READ},
    ),
    Route(f"{JOB}/cancel", cancel_job, ("POST",), responses={"HTTP_200": JobOut, **_ACT}),
    Route(
        f"{JOB}/requeue",
        requeue_job,
        ("POST",),
        json=RequeueRequest,
        responses={"HTTP_200": JobOut, **_ACT, **_BODY},
    ),
    Route(f"{JOB}/retry", retry_job, ("POST",), responses={"HTTP_200": JobOut, **_ACT}),
    Route(JOB, ops.delete_job, ("DELETE",), responses={"HTTP_204": None, **_ACT}),
    Route(
        f"{JOB}/events",
        job_events,
        query=EventsQuery,
        responses={"HTTP_200": EventList, "HTTP_404": E, **_READ},
    ),
    Route(
        "/api/recovery",
        run_recovery,
        ("POST",),
        query=RecoveryQuery,
        responses={"HTTP_200": RecoveryOut, **_ACT},
        tags=("recovery",),
    ),
    Route(
        "/api/purge",
        ops.run_purge,
        ("POST",),
        query=PurgeQuery,
        json=PurgeRequest,
        responses={"HTTP_200": PurgeOut, **_ACT, **_BODY},
        tags=_RETENTION,
    ),
    Route("/api/queues", ops.list_queues, responses={"HTTP_200": QueueList, **_READ}, tags=_QUEUES),
    Route(
        f"{QUEUE}/pause", ops.pause_queue, ("POST",), responses={"HTTP_200": QueueOut, **_ACT}, tags=_QUEUES
    ),
    Route(
        f"{QUEUE}/resume", ops.resume_queue, ("POST",), responses={"HTTP_200": QueueOut, **_ACT}, tags=_QUEUES
    ),
    Route("/api/handlers", list_handlers, responses={"HTTP_200": HandlerList, **_READ}, tags=_OPS),
    Route("/api/periodic", ops.list_periodic, responses={"HTTP_200": ScheduleList, **_READ}, tags=_PERIODIC),
    Route(
        f"{PERIODIC}/enable",
        ops.enable_periodic,
        ("POST",),
        responses={"HTTP_200": ScheduleOut, **_ACT},
        tags=_PERIODIC,
    ),
    Route(
        f"{PERIODIC}/disable",
        ops.disable_periodic,
        ("POST",),
        responses={"HTTP_200": ScheduleOut, **_ACT},
        tags=_PERIODIC,
    ),
    Route(
        f"{PERIODIC}/run",
        ops.run_periodic,
        ("POST",),
        responses={"HTTP_202": JobOut, "HTTP_422": E, **_ACT},
        tags=_PERIODIC,
        enqueues=True,
    ),
    Route("/api/stats", stats, responses={"HTTP_200": StatsOut, **_READ}, tags=_OPS),
    Route("/api/workers", list_workers, responses={"HTTP_200": WorkerList, **_READ}, tags=_OPS),
    Route(
        "/api/workers/<worker_id>/quiet",
        control.quiet_worker,
        ("POST",),
        responses={"HTTP_200": WorkerCommandOut, **_ACT},
        tags=_OPS,
    ),
    Route(
        "/api/workers/<worker_id>/unquiet",
        control.unquiet_worker,
        ("POST",),
        responses={"HTTP_200": WorkerCommandOut, **_ACT},
        tags=_OPS,
    ),
    Route(
        "/api/workers/<worker_id>/stop",
        control.stop_worker,
        ("POST",),
        responses={"HTTP_200": WorkerCommandOut, **_ACT},
        tags=_OPS,
    ),
    Route(
        "/api/operations",
        control.create_operation,
        ("POST",),
        json=OperationRequest,
        responses={"HTTP_202": OperationOut, "HTTP_200": OperationOut, **_ACT, **_BODY},
        tags=_OPERATIONS,
    ),
    Route(
        "/api/operations",
        control.list_operations,
        query=ListOperationsQuery,
        responses={"HTTP_200": OperationPage, **_READ},
        tags=_OPERATIONS,
    ),
    Route(
        "/api/operations/<operation_id>",
        control.get_operation,
        responses={"HTTP_200": OperationOut, "HTTP_404": E, **_READ},
        tags=_OPERATIONS,
    ),
    Route(
        f"{QUEUE}/limits",
        flow.set_limits,
        ("PUT",),
        responses={"HTTP_200": flow.LimitsOut, **_ACT, **_BODY},
        tags=_QUEUES,
    ),
    Route(f"{QUEUE}/limits", flow.get_limits, responses={"HTTP_200": flow.LimitsOut, **_READ}, tags=_QUEUES),
    Route(
        "/api/batches",
        flow.create_batch,
        ("POST",),
        responses={"HTTP_202": flow.BatchOut, **_ACT, **_BODY},
        tags=_FLOW,
    ),
    Route(
        "/api/batches",
        batch_list.list_batches,
        query=batch_list.ListBatchesQuery,
        responses={"HTTP_200": batch_list.BatchPage, **_READ},
        tags=_FLOW,
    ),
    Route(
        "/api/batches/<batch_id>",
        flow.get_batch,
        responses={"HTTP_200": flow.BatchOut, "HTTP_404": E, **_READ},
        tags=_FLOW,
    ),
    Route(
        "/api/batches/<batch_id>/cancel",
        flow.cancel_batch,
        ("POST",),
        responses={"HTTP_200": flow.BatchOut, **_ACT},
        tags=_FLOW,
    ),
    Route(
        f"{JOB}/dependencies",
        flow.job_dependencies,
        responses={"HTTP_200": flow.DependenciesOut, "HTTP_404": E, **_READ},
    ),
    Route("/metrics", prometheus_metrics, responses={"HTTP_200": None, **_READ}, tags=_OPS),
    Route("/openapi.json", openapi, responses={"HTTP_200": None, "HTTP_401": E}, tags=_OPS),
)

ROUTES += alerts.route_table(Route, _READ, _ACT, _BODY) + job_logs.route_table(Route, JOB, _READ, E)

#: Endpoints that take no token.
ANONYMOUS: frozenset[str] = frozenset(f"api.{r.view.__name__}" for r in ROUTES if r.anonymous)


def documented_responses(route: Route) -> dict[str, Any]:
    """``route.responses`` and the errors the blueprint's hooks answer on any
    such route (auth and body checks run before every view): 401 without a
    token; on a mutating method also 403 (viewer token) and 400/413/415."""
    responses = dict(route.responses)
    implied = {} if route.anonymous else {"HTTP_401": E}
    if set(route.methods) - READ_METHODS:
        implied |= {"HTTP_403": E, **_BODY} if not route.anonymous else _BODY
    for code, model in implied.items():
        responses.setdefault(code, model)
    return responses


def register(bp: Blueprint, spec: SpecTree, enqueue_operations: set[str] | None = None) -> None:
    """Add every route of ROUTES to ``bp``, validated and documented by ``spec``
    (routes that enqueue: documented only, see ``direct``); operationIds are
    the views' names. The operationIds of routes that enqueue are added to
    ``enqueue_operations``."""
    for route in ROUTES:
        responses = documented_responses(route)
        codes = {k: v for k, v in responses.items() if v is not None}
        bare = tuple(k for k, v in responses.items() if v is None)
        view = spec.validate(
            query=route.query,
            json=route.json,
            resp=SpecResponse(*bare, **codes),
            tags=list(route.tags),
            security={} if route.anonymous else None,
            operation_id=route.view.__name__,
        )(route.view)
        if route.enqueues:
            view = direct(view, route.view)  # the view validates its body itself
            if enqueue_operations is not None:
                enqueue_operations.add(route.view.__name__)
        bp.add_url_rule(route.rule, endpoint=route.view.__name__, view_func=view, methods=list(route.methods))
