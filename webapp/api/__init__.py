"""The JSON API: routes, auth, async endpoints, metrics.

``init_app(app)`` (called by ``create_app``) parses LEASEHOLD_API_TOKENS
(ConfigError on a bad value), builds the app's own OpenAPI generator and
metrics registry, and registers the ``api`` blueprint. Public helpers for
applications: ``async_endpoint`` and ``set_job_status_response``.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Flask, current_app, request
from spectree import SecurityScheme, SpecTree
from spectree.models import SecuritySchemeData
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from webapp.api import errors, routes
from webapp.api.async_endpoints import DEFAULT_STORED_HEADERS, async_endpoint
from webapp.api.auth import READ_METHODS, authorize, parse_api_tokens
from webapp.api.bodies import read_json_body
from webapp.api.errors import APIError
from webapp.api.schema_cache import SchemaCachingAdapter
from webapp.api.schemas import ErrorResponse
from webapp.api.state import EXTENSION, ApiState, api_state
from webapp.api.status_responses import (
    problem_on_failure,
    set_job_status_response,
    summary_status_response,
)
from webapp.config import WebSettings
from webapp.console.auth import current_user
from webapp.metrics import make_registry

__all__ = [
    "DEFAULT_STORED_HEADERS",
    "async_endpoint",
    "init_app",
    "problem_on_failure",
    "set_job_status_response",
    "summary_status_response",
]

#: Paths whose routing errors (404, 405) are answered in the API's envelope.
API_PREFIXES = ("/api/", "/metrics", "/openapi.json", "/healthz")
API_VERSION = "1.0.0"


def _validation_failed(_req: Any, _resp: Any, error: Exception | None, *_: Any) -> None:
    """spectree hook: a request that failed its schema becomes a 422 envelope."""
    if error is not None:
        raise errors.from_pydantic(error)  # type: ignore[arg-type]


def _response_mismatch(_req: Any, _resp: Any, error: Exception | None, *_: Any) -> None:
    """spectree hook: a response that does not match its documented schema is
    a bug; log it and answer 500 in the envelope (not spectree's own body)."""
    if error is not None:
        current_app.logger.error(
            "response of %s %s does not match its schema: %s", request.method, request.path, error
        )
        raise errors.APIError(500, "internal error")


def _make_spec() -> SpecTree:
    return SpecTree(
        "flask",
        mode="strict",
        annotations=False,
        title="Leasehold API",
        version=API_VERSION,
        description="Jobs with leases: enqueue, inspect, steer, recover. Bearer tokens (viewer, operator).",
        page_templates={},
        naming_strategy=lambda model: model.__name__,
        nested_naming_strategy=lambda _parent, child: child,
        validation_error_status=422,
        validation_error_model=ErrorResponse,
        before=_validation_failed,
        after=_response_mismatch,
        security_schemes=[
            SecurityScheme(name="bearer", data=SecuritySchemeData(type="http", scheme="bearer"))
        ],
        security={"bearer": []},
        model_adapter=SchemaCachingAdapter(),
    )


def _protect() -> None:
    """Deny by default: every API request needs a token, except ANONYMOUS routes;
    GET/HEAD need viewer, every other method operator. Mounted in a host app
    with an ``authorize`` hook, an ANONYMOUS route is anonymous no more: it
    needs a user the hook accepts, or a token, like every route under the prefix."""
    embedded = current_app.extensions["leasehold.mount"].authorize is not None
    if request.endpoint in routes.ANONYMOUS and (not embedded or current_user() is not None):
        return
    authorize(api_state().tokens, request.method)


def _read_body() -> None:
    """Check a mutating request's body (size, media type, JSON, shape) before validation.
    The size limit is LEASEHOLD_MAX_CONTENT_LENGTH, set on this request only
    (a host app's own MAX_CONTENT_LENGTH is left alone). Every body of the
    API is a JSON object, or ``null`` where it may be left out: anything else
    is 422 naming ``body``."""
    request.max_content_length = current_app.extensions["leasehold.web"].max_content_length
    if request.method not in READ_METHODS:
        body = read_json_body()
        if body is not None and not isinstance(body, dict):
            raise APIError(422, "body: must be a JSON object (or null)", "body")


def _owns_routing_error(exc: HTTPException) -> bool:
    """True when a 404/405 is the API's to answer: a path under API_PREFIXES,
    or a wrong method on an async endpoint."""
    if request.path.startswith(API_PREFIXES):
        return True
    if isinstance(exc, MethodNotAllowed) and exc.valid_methods:
        try:
            adapter = current_app.url_map.bind_to_environ(request.environ)
            endpoint, _ = adapter.match(method=sorted(exc.valid_methods)[0])
        except HTTPException:
            return False
        return endpoint in api_state().async_endpoints
    return False


def init_app(app: Flask, web: WebSettings, url_prefix: str = "", owns_app: bool = True) -> None:
    """Register the API on ``app`` under ``url_prefix`` (called by the
    ``Leasehold`` extension). Raises ConfigError for bad LEASEHOLD_API_TOKENS.
    ``owns_app``: the app is Leasehold's own, so routing errors (404, 405) on
    the API's paths may be answered in its envelope by an app-wide hook; in a
    host app they stay the host's."""
    tokens = parse_api_tokens(web.api_tokens)
    registry = make_registry(lambda: app.extensions["leasehold"], web.metrics_sample_jobs)
    spec = _make_spec()
    state = app.extensions[EXTENSION] = ApiState(tokens=tokens, spec=spec, metrics=registry)
    bp = Blueprint("api", __name__, url_prefix=url_prefix or None)
    bp.before_request(_protect)
    bp.before_request(_read_body)
    routes.register(bp, spec, state.enqueue_operations)
    errors.init_app(app, bp, _owns_routing_error if owns_app else None)
    app.register_blueprint(bp)
