"""The console blueprint: the login gate, CSRF, headers, errors and rendering helpers.

A page and its fragment come from the same endpoint: ``render_view`` returns
the partial when the request carries ``HX-Request`` (and is not a history
restore), the full page otherwise, and always sends ``Vary: HX-Request``.

Templates are rendered by ``render_template`` here, with an overlay of the
app's Jinja environment whose loader reads only the console's templates and
which alone holds the console's filters: mounted in a host app, the host's
``base.html`` cannot shadow ours and our filters do not land in the host's
templates. Static files are the blueprint's (``console.static``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import orjson
from flask import (
    Blueprint,
    Response,
    current_app,
    g,
    make_response,
    redirect,
    request,
    url_for,
)
from flask_wtf.csrf import CSRFError
from jinja2 import Environment, FileSystemLoader
from werkzeug.exceptions import HTTPException

from store.base import JobStore
from store.errors import StoreUnavailable
from webapp.config import Settings
from webapp.console import auth, security


def _resources(name: str) -> str:
    """Where ``templates`` or ``static`` is: inside the ``webapp`` package when
    installed (the wheel maps them there), else the checkout's top-level folder."""
    webapp = Path(__file__).resolve().parent.parent
    inside = webapp / name
    return str(inside if inside.is_dir() else webapp.parent / name)


TEMPLATES = _resources("templates")
bp = Blueprint("console", __name__, static_folder=_resources("static"), static_url_path="/static")

#: Endpoints reachable without logging in (with the console's own logins).
PUBLIC = frozenset({"console.login", "console.static", "console.favicon"})
#: Endpoints of the console's own login, unused when a host's hook decides.
OWN_LOGIN = frozenset({"console.login", "console.logout"})
#: The console's template filters: only in its own Jinja overlay (see render_template).
FILTERS: dict[str, Callable[..., Any]] = {}
#: Largest JSON document shown in full (characters); longer ones are cut.
MAX_JSON_CHARS = 200_000


def store() -> JobStore:
    return current_app.extensions["leasehold"]


def settings() -> Settings:
    return current_app.extensions["leasehold.settings"]


def is_htmx() -> bool:
    """True for an htmx request that wants a fragment (not a history restore)."""
    return request.headers.get("HX-Request") == "true" and "HX-History-Restore-Request" not in request.headers


def _environment() -> Environment:
    """The console's overlay of the app's Jinja environment (built once per app)."""
    env = current_app.extensions.get("leasehold.console.jinja")
    if env is None:
        env = current_app.jinja_env.overlay(loader=FileSystemLoader(TEMPLATES))
        env.filters = {**current_app.jinja_env.filters, **FILTERS}
        current_app.extensions["leasehold.console.jinja"] = env
    return env


def render_template(name: str, **context: Any) -> str:
    """Render a console template with the app's context processors (url_for,
    request, session, g, flashed messages, the blueprint's own) applied."""
    current_app.update_template_context(context)
    return _environment().get_or_select_template(name).render(context)


def render_view(page: str, partial: str, status: int = 200, **context: Any) -> Response:
    """The page, or its partial for htmx; ``Vary: HX-Request`` either way."""
    response = make_response(render_template(partial if is_htmx() else page, **context), status)
    response.vary.add("HX-Request")
    return response


#: What ``safe_next`` drops before parsing: C0 and C1 control characters and
#: every whitespace character. Browsers drop tab, CR and LF from a URL
#: (``/<TAB>/evil.example`` is ``//evil.example`` to them), and a CR or LF in
#: ``Location`` cannot be sent at all.
_DROPPED = re.compile(r"[\x00-\x1f\x7f-\x9f\s]")


def safe_next(target: str | None) -> str:
    """A local path to go to after login, never another host: ``target``
    without control characters and whitespace, when what is left is a path
    that starts with exactly one ``/``, holds no backslash (browsers read
    ``/\\host`` as ``//host``) and has no scheme or host; else the overview."""
    cleaned = _DROPPED.sub("", target or "")
    if cleaned.startswith("/") and not cleaned.startswith("//") and "\\" not in cleaned:
        parts = urlsplit(cleaned)
        if not parts.scheme and not parts.netloc:
            return cleaned
    return url_for("console.overview")


def _login_url(back: str | None) -> str | None:
    """Where to log in, coming back to ``back``: the console's own login page,
    or the host's ``login_url`` (None: the host gave none)."""
    if auth.hook() is None:
        return url_for("console.login", next=back or None)
    host_login = current_app.extensions["leasehold.mount"].login_url
    if host_login is None:
        return None
    joiner = "&" if "?" in host_login else "?"
    return host_login + (joiner + urlencode({"next": back}) if back else "")


@bp.before_request
def gate() -> Response | None:
    """Log-in required everywhere but /login and static files; CSRF on every POST."""
    if request.method == "POST":
        security.protect()
    if request.endpoint == "console.static":
        return None
    if auth.hook() is not None and request.endpoint in OWN_LOGIN:
        target = _login_url(safe_next(request.values.get("next")))
        return redirect(target) if target else _error(404, "Not Found", "Log in through the application.")
    if request.endpoint in PUBLIC or auth.current_user() is not None:
        return None
    if request.headers.get("HX-Request") == "true":
        response = make_response("Log in again.", 401)
        current = urlsplit(request.headers.get("HX-Current-URL", ""))
        back = current.path + (f"?{current.query}" if current.query else "")
        target = _login_url(back or None)
        if target:
            response.headers["HX-Redirect"] = target
        return response
    target = _login_url(request.full_path.rstrip("?"))
    if target is None:
        return _error(401, "Unauthorized", "Log in to the application first.")
    return redirect(target)


@bp.get("/favicon.ico")
def favicon() -> Response:
    """The console's icon where a browser looks for one without a ``<link rel=icon>``
    (a JSON or error page): the SVG every page links."""
    return redirect(url_for("console.static", filename="favicon.svg"), 301)


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
def _filter(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        FILTERS[name] = function
        return function

    return register


@_filter("pretty_json")
def pretty_json(value: Any) -> str:
    """JSON indented for reading (escaped by the template like any text)."""
    try:
        text = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        text = repr(value)
    if len(text) > MAX_JSON_CHARS:
        text = text[:MAX_JSON_CHARS] + f"\n… cut at {MAX_JSON_CHARS:,} characters"
    return text


@_filter("seconds")
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


@_filter("left")
def left(value: float | None) -> str:
    """Seconds left on a countdown: ``12 s``, or ``expired 3 s ago`` when negative."""
    if value is None:
        return "—"
    return seconds(value) if value >= 0 else f"expired {seconds(value)} ago"


@_filter("utc")
def utc(value: Any) -> str:
    return "—" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


@_filter("epoch_utc")
def epoch_utc(value: float | None) -> str:
    """Epoch seconds as ``utc`` shows a datetime."""
    return "—" if value is None else utc(datetime.fromtimestamp(value, UTC))


@_filter("short_id")
def short_id(value: str | None) -> str:
    """The last 8 characters of a job id: the random tail of a UUIDv7 (its
    head is the creation time, shared by jobs created together)."""
    return f"…{value[-8:]}" if value else ""


@bp.context_processor
def console_context() -> dict[str, Any]:
    """What every console template sees (only console requests: blueprint-scoped)."""
    return {
        "user": g.get("console_user"),
        "csrf_token": security.csrf_token,
        "own_login": auth.hook() is None,
        # A sharded Redis store's shards that did not answer (store/redis/shards/health.py).
        "unavailable_shards": getattr(store(), "unavailable_shards", dict),
    }
