"""The console's protections: secret key, session cookie, CSRF, response headers.

* LEASEHOLD_SECRET_KEY is required (ConfigError naming it) unless testing.
* The session cookie is HttpOnly, SameSite=Lax, and Secure when the request
  came over https or LEASEHOLD_SECURE_COOKIES is set; it lives SESSION_HOURS.
* Flask-WTF's CSRFProtect checks every console POST (form field ``csrf_token``
  or the ``X-CSRFToken`` header htmx sends from ``<body hx-headers>``). It does
  not check other blueprints by default: the JSON API authenticates with bearer
  tokens, which a browser does not send on its own.
* Every console response carries a Content-Security-Policy with no inline
  script or style, nosniff, no framing, and ``Cache-Control: no-store``.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from flask import Flask, Response, request
from flask.sessions import SecureCookieSessionInterface
from flask_wtf.csrf import CSRFProtect

from webapp.config import ConfigError

#: Session lifetime; a stolen cookie stops working after this long.
SESSION_HOURS = 12

CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)

HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
}


class ConsoleSessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie session whose Secure flag follows the request:
    set for https requests, or always with LEASEHOLD_SECURE_COOKIES."""

    def get_cookie_secure(self, app: Flask) -> bool:
        return bool(app.config.get("SESSION_COOKIE_SECURE")) or request.is_secure


def _flag(value: object) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def init_app(app: Flask) -> CSRFProtect:
    """Check the secret key, configure the cookie and CSRF; returns the CSRFProtect."""
    if not app.config.get("SECRET_KEY"):
        if app.testing:
            app.config["SECRET_KEY"] = secrets.token_hex(32)
        else:
            raise ConfigError(
                "LEASEHOLD_SECRET_KEY must be set (a long random string; it signs console sessions "
                "and CSRF tokens), e.g. python -c 'import secrets; print(secrets.token_hex(32))'"
            )
    app.config.update(
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=_flag(app.config.get("SECURE_COOKIES", False)),
        PERMANENT_SESSION_LIFETIME=timedelta(hours=SESSION_HOURS),
    )
    app.session_interface = ConsoleSessionInterface()
    app.config.setdefault("WTF_CSRF_CHECK_DEFAULT", False)  # the console checks its own POSTs
    app.config.setdefault("WTF_CSRF_TIME_LIMIT", None)  # valid for the session's lifetime
    existing = app.extensions.get("csrf")
    return existing if isinstance(existing, CSRFProtect) else CSRFProtect(app)


def add_headers(response: Response) -> Response:
    """The security headers, and ``no-store``: every console page shows job
    data or carries a CSRF token bound to the session (the login form)."""
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    response.headers["Cache-Control"] = "no-store"
    return response
