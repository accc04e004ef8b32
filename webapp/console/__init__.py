"""The ops console: server-rendered pages with HTMX partials.

Pages and fragments are in ``views``, actions in ``actions``, logins in
``auth``, protections in ``security``; templates in ``templates/`` (fragments
in ``templates/partials/``), CSS and JS in ``static/`` (htmx is copied from
the npm package into ``static/vendor/`` at set-up), served by the blueprint.
"""

from __future__ import annotations

from flask import Flask

from webapp.config import WebSettings


def init_app(app: Flask, web: WebSettings, url_prefix: str = "", authorize: object | None = None) -> None:
    """Register the console under ``url_prefix`` (called by the ``Leasehold``
    extension). Raises ConfigError for a malformed LEASEHOLD_USERS."""
    from webapp.console import (  # noqa: F401 - registers the routes
        actions,
        alerts,
        auth,
        batches,
        bulk,
        control,
        flow_pages,
        graphs,
        handlers,
        job_logs_pages,
        new_job,
        operating_pages,
        views,
    )
    from webapp.console.blueprint import bp

    auth.init_app(app, web, authorize)
    app.register_blueprint(bp, url_prefix=url_prefix or None)
