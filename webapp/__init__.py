"""The Leasehold web app: JSON API, ops console and metrics.

Two ways to serve them:

* ``create_app(overrides=None)``: the standalone app (``wsgi.py``,
  ``leasehold web``): defaults, then ``LEASEHOLD_*`` from the environment (as
  strings, never guessed as JSON; an unknown name is refused), then ``overrides``; the settings are
  validated; then it is one user of the ``Leasehold`` extension, at prefix
  ``""`` with the console's own logins, behind ``LEASEHOLD_TRUSTED_PROXIES``.
* ``Leasehold(app, url_prefix="/ops", authorize=...)``: the console and the
  API mounted in a host Flask app (see ``webapp.extension``).

Either way the store is opened once per process into ``app.extensions["leasehold"]``.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from leasehold.settings import check_names
from webapp.config import DEFAULTS, load_web_settings
from webapp.extension import Leasehold, apply_proxy_fix


def create_app(overrides: dict[str, Any] | None = None, *, store: Any = None) -> Flask:
    """Build the standalone app. ``store``: an open JobStore to serve
    instead of opening ``LEASEHOLD_STORE_URL`` (the app does not close it).
    Raises webapp.config.ConfigError for a bad setting or an unknown
    ``LEASEHOLD_*`` variable."""
    check_names()
    app = Flask(__name__, instance_relative_config=False, static_folder=None, template_folder=None)
    app.config.update(DEFAULTS)
    app.config.from_prefixed_env("LEASEHOLD", loads=str)
    if overrides:
        app.config.update(overrides)
    web = load_web_settings(app.config)
    app.config["MAX_CONTENT_LENGTH"] = web.max_content_length  # bytes; larger bodies get 413

    from webapp.console import security

    security.init_standalone(app, web)
    Leasehold(app, url_prefix="", config=app.config, store=store)
    app.after_request(drain_unread_body)
    apply_proxy_fix(app, web)
    return app


#: Bytes read at a time when discarding what is left of a request body.
_DRAIN_CHUNK = 64 * 1024


def drain_unread_body(response: Response) -> Response:
    """Read and discard what the app left of the request body (a 401 or 415
    refused before reading it), at most the body limit, so the server can
    serve the connection's next request: gunicorn drains only 64 KiB of an
    unread body and otherwise closes a connection it announced as keep-alive.
    A body past the limit is never read: ``webapp.gunicorn_conf.pre_request``
    has the server answer ``Connection: close`` for it instead."""
    limit = request.max_content_length
    length = request.content_length
    if length is None or (limit is not None and length > limit):
        return response
    try:
        stream = request.stream
        while stream.read(_DRAIN_CHUNK):
            pass
    except (OSError, ValueError, HTTPException):  # the client went away, or the stream is spent
        pass
    return response


__all__ = ["Leasehold", "create_app"]
