"""The console blueprint: the login gate, CSRF, headers, errors and rendering helpers.

A page and its fragment come from the same endpoint: ``render_view`` returns
the partial when the request carries ``HX-Request`` (and is not a history
restore), the full page otherwise, and always sends ``Vary: HX-Request``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import orjson
from flask import (
    Blueprint,
    Response,
    current_app,
    g,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import HTTPException

from store.base import JobStore
from store.errors import StoreUnavailable
from webapp.config import Settings
from webapp.console import auth, security

bp = Blueprint("console", __name__)

#: Endpoints reachable without logging in.
PUBLIC = frozenset({"console.login"})
#: Largest JSON document shown in full (characters); longer ones are cut.
MAX_JSON_CHARS = 200_000


def store() -> JobStore:
    return current_app.extensions["leasehold"]


def settings() -> Settings:
    return current_app.extensions["leasehold.settings"]


def is_htmx() -> bool:
    """True for an htmx request that wants a fragment (not a history restore)."""
    return request.headers.get("HX-Request") == "true" and "HX-History-Restore-Request" not in request.headers


def render_view(page: str, partial: str, status: int = 200, **context: Any) -> Response:
    """The page, or its partial for htmx; ``Vary: HX-Request`` either way."""
    response = make_response(render_template(partial if is_htmx() else page, **context), status)
    response.vary.add("HX-Request")
    return response


def safe_next(target: str | None) -> str:
    """A local path to go to after login (never another host)."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return url_for("console.overview")


@bp.before_request
def gate() -> Response | None:
    """Log-in required everywhere but /login; CSRF on every POST."""
    if request.method == "POST":
        csrf: Any = current_app.extensions["csrf"]
        csrf.protect()
    if request.endpoint in PUBLIC or auth.current_user() is not None:
        return None
    login = url_for("console.login", next=request.full_path.rstrip("?"))
    if request.headers.get("HX-Request") == "true":
        response = make_response("Log in again.", 401)
        current = urlsplit(request.headers.get("HX-Current-URL", ""))
        back = current.path + (f"?{current.query}" if current.query else "")
        response.headers["HX-Redirect"] = url_for("console.login", next=back or None)
        return response
    return redirect(login)


@bp.after_request
def headers(response: Response) -> Response:
    return security.add_headers(response)


def _error(status: int, title: str, message: str) -> Response:
    response = render_view("error.html", "partials/message.html", status=status, title=title, message=message)
    if status == 503:
        response.headers["Retry-After"] = "5"
    return response


@bp.errorhandler(CSRFError)
def csrf_error(exc: CSRFError) -> Response:
    return _error(400, "Form expired", f"{exc.description} Reload the page and try again.")


@bp.errorhandler(StoreUnavailable)
def store_unavailable(exc: StoreUnavailable) -> Response:
    current_app.logger.warning("console: store unavailable: %s", exc)
    return _error(503, "Store unavailable", "The job store did not answer. The page retries on its own.")


@bp.errorhandler(HTTPException)
def http_error(exc: HTTPException) -> Response:
    return _error(exc.code or 500, exc.name, exc.description or "")


# ------------------------------------------------------------- templates
@bp.app_template_filter("pretty_json")
def pretty_json(value: Any) -> str:
    """JSON indented for reading (escaped by the template like any text)."""
    try:
        text = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        text = repr(value)
    if len(text) > MAX_JSON_CHARS:
        text = text[:MAX_JSON_CHARS] + f"\n… cut at {MAX_JSON_CHARS:,} characters"
    return text


@bp.app_template_filter("seconds")
def seconds(value: float | None) -> str:
    """A duration for people: 42 s, 3.5 min, 2.0 h, 4.1 d."""
    if value is None:
        return "—"
    value = abs(value)
    if value < 1:
        return f"{value:.1f} s"
    if value < 120:
        return f"{value:.0f} s"
    if value < 7200:
        return f"{value / 60:.1f} min"
    if value < 172800:
        return f"{value / 3600:.1f} h"
    return f"{value / 86400:.1f} d"


@bp.app_template_filter("left")
def left(value: float | None) -> str:
    """Seconds left on a countdown: ``12 s``, or ``expired 3 s ago`` when negative."""
    if value is None:
        return "—"
    return seconds(value) if value >= 0 else f"expired {seconds(value)} ago"


@bp.app_template_filter("utc")
def utc(value: Any) -> str:
    return "—" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


@bp.app_template_filter("short_id")
def short_id(value: str | None) -> str:
    """The last 8 characters of a job id: the random tail of a UUIDv7 (its
    head is the creation time, shared by jobs created together)."""
    return f"…{value[-8:]}" if value else ""


@bp.app_context_processor
def console_context() -> dict[str, Any]:
    return {"user": g.get("console_user")}
