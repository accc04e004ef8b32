"""The JSON API's routes and their table.

Views are plain functions (``webapp.api.job_views`` and the modules of each
surface); ``ROUTES`` says for each its rule, methods, request
models and documented responses, and ``register`` wraps every view with the
app's spectree validator (request validation and ``/openapi.json``) on the
app's blueprint. Authentication is not per view: the blueprint's
``before_request`` refuses every request without a valid token (see auth).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flask import Blueprint
from pydantic import BaseModel
from spectree import Response as SpecResponse
from spectree import SpecTree

from webapp.api import alerts, batch_list, control, flow_api, job_logs_api, job_wait
from webapp.api import operating_api as ops
from webapp.api.auth import READ_METHODS
from webapp.api.direct import direct
from webapp.api.handler_metrics_route import handler_metrics_view
from webapp.api.job_views import (
    cancel_job,
    enqueue_job,
    get_job,
    healthz,
    job_events,
    list_handlers,
    list_jobs,
    list_workers,
    openapi,
    prometheus_metrics,
    requeue_job,
    retry_job,
    run_recovery,
    stats,
)
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
    HandlerMetricsOut,
    HandlerMetricsQuery,
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

JOB = "/api/jobs/<uuid:job_id>"
QUEUE = "/api/queues/<path:queue>"
PERIODIC = "/api/periodic/<path:name>"
E = ErrorResponse


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
    Route(
        "/api/handlers/<path:name>/metrics",
        handler_metrics_view,
        query=HandlerMetricsQuery,
        # 404: a name the path cannot carry (a line break in it)
        responses={"HTTP_200": HandlerMetricsOut, "HTTP_404": E, **_READ},
        tags=_OPS,
    ),
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
        flow_api.set_limits,
        ("PUT",),
        responses={"HTTP_200": flow_api.LimitsOut, **_ACT, **_BODY},
        tags=_QUEUES,
    ),
    Route(
        f"{QUEUE}/limits",
        flow_api.get_limits,
        # 404: a queue name the path cannot carry (a line break in it)
        responses={"HTTP_200": flow_api.LimitsOut, "HTTP_404": E, **_READ},
        tags=_QUEUES,
    ),
    Route(
        "/api/batches",
        flow_api.create_batch,
        ("POST",),
        responses={"HTTP_202": flow_api.BatchOut, **_ACT, **_BODY},
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
        flow_api.get_batch,
        responses={"HTTP_200": flow_api.BatchOut, "HTTP_404": E, **_READ},
        tags=_FLOW,
    ),
    Route(
        "/api/batches/<batch_id>/cancel",
        flow_api.cancel_batch,
        ("POST",),
        responses={"HTTP_200": flow_api.BatchOut, **_ACT},
        tags=_FLOW,
    ),
    Route(
        f"{JOB}/dependencies",
        flow_api.job_dependencies,
        responses={"HTTP_200": flow_api.DependenciesOut, "HTTP_404": E, **_READ},
    ),
    Route("/metrics", prometheus_metrics, responses={"HTTP_200": None, **_READ}, tags=_OPS),
    Route("/openapi.json", openapi, responses={"HTTP_200": None, "HTTP_401": E}, tags=_OPS),
)

ROUTES += alerts.route_table(Route, _READ, _ACT, _BODY) + job_logs_api.route_table(Route, JOB, _READ, E)

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
