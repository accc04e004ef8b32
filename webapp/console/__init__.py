"""The ops console: server-rendered pages with HTMX partials (DESIGN.md section 7).

Pages and fragments are in ``views``, actions in ``actions``, logins in
``auth``, protections in ``security``; templates in ``templates/`` (fragments
in ``templates/partials/``), CSS and JS in ``static/`` (htmx is copied from
the npm package into ``static/vendor/`` at set-up).
"""

from __future__ import annotations

from flask import Flask


def init_app(app: Flask) -> None:
    """Register the console. Raises ConfigError for a missing LEASEHOLD_SECRET_KEY
    (unless testing) or a malformed LEASEHOLD_USERS."""
    from webapp.console import actions, auth, operating, security, views  # noqa: F401 - registers the routes
    from webapp.console.blueprint import bp

    security.init_app(app)
    auth.init_app(app)
    app.register_blueprint(bp)
