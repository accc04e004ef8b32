"""The API's one error shape and the mapping of every failure onto it.

Every error the API answers is ``{"error": {"code": <int>, "message": <str>,
"field": <str, optional>}}`` with the HTTP status equal to ``code``:

=====  ============================================================
400    malformed JSON body
401    no or bad bearer token (``WWW-Authenticate: Bearer``)
403    a viewer token on a mutating route
404    unknown job, schedule or route
405    wrong method (the action routes are POST only); ``Allow`` set
409    InvalidTransition, LeaseLost, lock held
413    body larger than MAX_CONTENT_LENGTH
415    a body that is not declared ``application/json``
422    validation: unknown field, out of range, too deep; an Idempotency-Key
       reused for a different request; ``field`` set
429    too many searches (``Retry-After`` set)
503    StoreUnavailable (``Retry-After`` set)
=====  ============================================================

Anything else is a bug: it is logged with its traceback and answered 500 in
the same shape, with no detail.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flask import Blueprint, Flask, current_app, request
from flask import Response as FlaskResponse
from pydantic import ValidationError as PydanticValidationError
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound

from store.errors import (
    InvalidTransition,
    JobNotFound,
    LeaseLost,
    ScheduleNotFound,
    StoreError,
    StoreTimeout,
    StoreUnavailable,
    ValidationError,
)
from webapp.api.encoding import json_response

#: Seconds a client should wait before retrying after a 503.
RETRY_AFTER_S = 5


class APIError(Exception):
    """An error answered in the envelope; ``headers`` are added to the response."""

    def __init__(
        self, code: int, message: str, field: str | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.headers = dict(headers or {})


def envelope(code: int, message: str, field: str | None = None) -> dict[str, Any]:
    """The error body: ``{"error": {"code", "message"[, "field"]}}``."""
    error: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        error["field"] = field
    return {"error": error}


def respond(exc: APIError) -> FlaskResponse:
    """The JSON response for ``exc``."""
    response = json_response(envelope(exc.code, exc.message, exc.field), exc.code)
    response.headers.update(exc.headers)
    return response


def field_of(loc: tuple[int | str, ...] | list[int | str]) -> str:
    """``("payload", "items", 3)`` -> ``"payload.items[3]"``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def from_pydantic(exc: PydanticValidationError, prefix: str | None = None) -> APIError:
    """422 naming the first invalid field (``prefix`` is e.g. ``query``)."""
    first = exc.errors(include_url=False, include_input=False)[0]
    field = field_of(first["loc"]) or (prefix or "body")
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown field"
    return APIError(422, f"{field}: {message}", field)


def to_api_error(exc: BaseException) -> APIError | None:
    """The APIError a known failure maps to, or None for a bug."""
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, JobNotFound | ScheduleNotFound):
        return APIError(404, str(exc))
    if isinstance(exc, InvalidTransition | LeaseLost):
        return APIError(409, str(exc))
    if isinstance(exc, ValidationError):
        return APIError(422, str(exc), exc.field)
    if isinstance(exc, StoreUnavailable):
        # A timeout's message names the limit only; an outage's may name hosts: not shown.
        message = str(exc) if isinstance(exc, StoreTimeout) else "the job store is unavailable; retry later"
        return APIError(503, message, headers={"Retry-After": str(RETRY_AFTER_S)})
    if isinstance(exc, StoreError):
        return APIError(409, str(exc))
    if isinstance(exc, PydanticValidationError):
        return from_pydantic(exc)
    if isinstance(exc, HTTPException) and exc.code is not None:
        headers = {}
        if isinstance(exc, MethodNotAllowed) and exc.valid_methods:
            headers["Allow"] = ", ".join(sorted(exc.valid_methods))
        message = exc.description or exc.name
        return APIError(exc.code, message, headers=headers)
    return None


def handle(exc: BaseException) -> FlaskResponse:
    """Flask error handler: the envelope for a known failure, 500 for a bug."""
    error = to_api_error(exc)
    if error is None:
        current_app.logger.exception("unhandled error in %s %s", request.method, request.path, exc_info=exc)
        error = APIError(500, "internal error")
    return respond(error)


def init_app(app: Flask, bp: Blueprint, owns: Callable[[HTTPException], bool] | None) -> None:
    """Register the envelope for the blueprint, and for routing failures
    (404, 405) that ``owns`` claims for the API, without taking over the app's
    own 404/405 handlers: the console keeps its HTML error pages. ``owns``
    None (a host app's): no app-wide hook; routing errors stay the host's."""
    bp.register_error_handler(Exception, handle)
    if owns is None:
        return

    @app.before_request
    def _api_routing_errors() -> FlaskResponse | None:
        exc = request.routing_exception
        if isinstance(exc, NotFound | MethodNotAllowed) and owns(exc):
            error = to_api_error(exc)
            assert error is not None
            return respond(error)
        return None
