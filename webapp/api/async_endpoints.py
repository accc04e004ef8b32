"""Async endpoints: an HTTP route that enqueues a job instead of doing the work.

The idea of .NET's AsyncEndpoints: ``POST /orders/<id>/invoice`` answers 202
at once with the job's URL in ``Location``; a worker runs the handler named
for the route, which finds the request on its context::

    from webapp.api import async_endpoint
    async_endpoint(app, "/orders/<int:order_id>/invoice", "make-invoice", queue="billing")

    @handler("make-invoice", queue="billing")
    def make_invoice(ctx):
        ctx.payload              # the JSON body (None when empty)
        ctx.route_params         # {"order_id": 42}
        ctx.query_params         # {"draft": "1"}; repeated keys give lists
        ctx.headers              # only the allow-listed headers

What is stored on the job: the JSON body as ``payload`` (checked like every
API body: size, JSON, depth), the route parameters, the query parameters,
and the request headers named in ``stored_headers``. Credentials are never
stored: naming Authorization, Cookie, Proxy-Authorization or Set-Cookie
raises ValueError when the endpoint is registered.

Same authentication as the API: an operator bearer token. ``Idempotency-Key``
is honoured as on ``POST /api/jobs``. Errors use the API's envelope.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import Any

from flask import Blueprint, Flask, Response, request
from flask.sansio.blueprints import BlueprintSetupState
from spectree import Response as SpecResponse

from store.models import JobSpec, validate_spec
from webapp.api import errors
from webapp.api.auth import authorize
from webapp.api.bodies import check_shape, read_json_body
from webapp.api.direct import direct
from webapp.api.enqueue import enqueue_response, idempotency_key
from webapp.api.schemas import ErrorResponse, JobOut
from webapp.api.state import api_state

#: Headers stored by default: safe to keep, useful to a handler.
DEFAULT_STORED_HEADERS: tuple[str, ...] = ("X-Request-Id", "Content-Type", "Accept-Language")
#: Headers never stored, whatever the configuration says.
NEVER_STORED: frozenset[str] = frozenset({"authorization", "cookie", "proxy-authorization", "set-cookie"})
_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _check_headers(names: Iterable[str]) -> tuple[str, ...]:
    out = tuple(str(n).strip() for n in names)
    refused = sorted(n for n in out if n.lower() in NEVER_STORED)
    if refused:
        raise ValueError(f"async endpoint may not store credential headers: {', '.join(refused)}")
    if any(not n for n in out):
        raise ValueError("async endpoint stored_headers has an empty name")
    return out


def _jsonable(value: Any) -> Any:
    return str(value) if isinstance(value, uuid.UUID) else value


def _request_parts(stored_headers: tuple[str, ...]) -> dict[str, Any]:
    headers = {name: request.headers[name] for name in stored_headers if name in request.headers}
    query = {key: values[0] if len(values) == 1 else values for key, values in request.args.lists()}
    route = {key: _jsonable(value) for key, value in (request.view_args or {}).items()}
    parts = {"headers": headers or None, "route_params": route or None, "query_params": query or None}
    check_shape(parts)
    return parts


def _make_view(job_name: str, queue: str, stored_headers: tuple[str, ...], options: dict[str, Any]) -> Any:
    def view(**_route_params: Any) -> Response:
        try:
            authorize(api_state().tokens, "POST")  # enqueueing is an action, whatever the method
            spec = JobSpec(
                name=job_name,
                payload=read_json_body(),
                queue=queue,
                idempotency_key=idempotency_key(),
                **_request_parts(stored_headers),
                **options,
            )
            return enqueue_response(spec)
        except Exception as exc:
            return errors.handle(exc)

    return view


def async_endpoint(
    target: Flask | Blueprint,
    rule: str,
    job_name: str,
    *,
    queue: str = "default",
    stored_headers: Iterable[str] = DEFAULT_STORED_HEADERS,
    methods: Iterable[str] = ("POST",),
    endpoint: str | None = None,
    priority: int = 0,
    max_retries: int | None = None,
    timeout_s: float | None = None,
) -> None:
    """Map ``rule`` to the job ``job_name``: each request enqueues one job.

    ``target`` is the app (after ``create_app``) or a blueprint (registered on
    such an app later). ``methods`` may not include GET/HEAD/OPTIONS (an
    enqueue is an action). Raises ValueError for credential headers, read
    methods, or job options the store would refuse."""
    verbs = tuple(m.upper() for m in methods)
    if not verbs or _READ_METHODS.intersection(verbs):
        raise ValueError("async endpoint methods must be non-empty and exclude GET, HEAD and OPTIONS")
    headers = _check_headers(stored_headers)
    options = {"priority": priority, "max_retries": max_retries, "timeout_s": timeout_s}
    validate_spec(JobSpec(name=job_name, queue=queue, **options))
    name = endpoint or "async_" + re.sub(r"\W", "_", job_name)
    view = _make_view(job_name, queue, headers, options)
    view.__name__ = name
    view.__doc__ = f"Enqueue a `{job_name}` job (queue `{queue}`) from this request; 202 with its URL."

    def register(app: Flask, add_url_rule: Any, full_name: str) -> None:
        documented = api_state(app).spec.validate(
            resp=SpecResponse(
                HTTP_200=JobOut,
                HTTP_202=JobOut,
                **{f"HTTP_{code}": ErrorResponse for code in (400, 401, 403, 413, 415, 422, 503)},
            ),
            tags=["async endpoints"],
            operation_id=name,
        )(view)
        api_state(app).enqueue_operations.add(name)
        add_url_rule(rule, endpoint=name, view_func=direct(documented, view), methods=verbs)
        api_state(app).async_endpoints.add(full_name)

    if isinstance(target, Blueprint):
        target.record(lambda state: _register_on_blueprint(state, register, name))
    else:
        register(target, target.add_url_rule, name)


def _register_on_blueprint(state: BlueprintSetupState, register: Any, name: str) -> None:
    # The endpoint name Flask gives a blueprint's rule (BlueprintSetupState.add_url_rule).
    full_name = f"{state.name_prefix}.{state.name}.{name}".lstrip(".")
    register(state.app, state.add_url_rule, full_name)
