"""Handlers for the API tests' real workers (LEASEHOLD_HANDLERS=tests.web.api_handlers)."""

from __future__ import annotations

from typing import Any

from workers import JobContext, handler


@handler("echo-request")
def echo_request(ctx: JobContext) -> dict[str, Any]:
    """Return what the async endpoint stored from the HTTP request."""
    return {
        "payload": ctx.payload,
        "headers": ctx.headers,
        "route_params": ctx.route_params,
        "query_params": ctx.query_params,
    }
