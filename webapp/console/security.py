"""The console's protections: session cookie, CSRF, response headers.

Everything here is scoped to the console's blueprint, except
``init_standalone``, which only the standalone app (``create_app``) calls:

* (standalone) LEASEHOLD_SECRET_KEY is required (ConfigError naming it) unless
  testing; the session cookie is HttpOnly, SameSite=Lax, and Secure when the
  request came over https or LEASEHOLD_SECURE_COOKIES is set; it lives
  SESSION_HOURS. In a host app the session and its cookie are the host's.
* ``protect`` checks every console POST with Flask-WTF's signed token (form
  field ``csrf_token`` or the ``X-CSRFToken`` header htmx sends from
  ``<body hx-headers>``), kept in the app's session. No app-wide CSRFProtect:
  a host's own forms are left to the host, and the JSON API authenticates
  with bearer tokens, which a browser does not send on its own.
* Every console response carries a Content-Security-Policy with no inline
  script or style, nosniff, no framing, and ``Cache-Control: no-store``.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from flask import Flask, Request, Response, request
from flask.sessions import SecureCookieSession, SecureCookieSessionInterface
from flask_wtf.csrf import CSRFError, generate_csrf, same_origin, validate_csrf
from wtforms import ValidationError

from webapp.config import ConfigError, WebSettings

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

    def open_session(self, app: Flask, request: Request) -> SecureCookieSession | None:
        """Without a session cookie (every API request: bearer tokens only),
        the new empty session Flask's would give, without building its
        signing serializer first (about a sixth of an API enqueue's time in
        the web layer). With a cookie, or without a secret key, Flask's own."""
        if app.secret_key and self.get_cookie_name(app) not in request.cookies:
            return self.session_class()
        return super().open_session(app, request)


#: Seconds a CSRF token stays valid: as long as a console session.
CSRF_TIME_LIMIT_S = SESSION_HOURS * 3600
#: Form field and headers a console POST may carry its CSRF token in.
CSRF_FIELD = "csrf_token"
CSRF_HEADERS = ("X-CSRFToken", "X-CSRF-Token")


def csrf_token() -> str:
    """The signed CSRF token of this session (the raw token is kept in the
    app's session under ``csrf_token``, Flask-WTF's key)."""
    return generate_csrf()


def protect() -> None:
    """Refuse a POST without a valid CSRF token: raises CSRFError (400)."""
    token = request.form.get(CSRF_FIELD) or next(
        (request.headers[h] for h in CSRF_HEADERS if h in request.headers), None
    )
    try:
        validate_csrf(token, time_limit=CSRF_TIME_LIMIT_S)
    except ValidationError as exc:
        raise CSRFError(exc.args[0]) from None
    if request.is_secure and not (
        request.referrer and same_origin(request.referrer, f"https://{request.host}/")
    ):
        raise CSRFError("The referrer does not match the host.")


def init_standalone(app: Flask, web: WebSettings) -> None:
    """The standalone app's own session: secret key and cookie. Raises
    ConfigError for a missing LEASEHOLD_SECRET_KEY (unless testing)."""
    if web.secret_key:
        app.config["SECRET_KEY"] = web.secret_key
    elif not app.config.get("SECRET_KEY"):
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
        SESSION_COOKIE_SECURE=web.secure_cookies,
        PERMANENT_SESSION_LIFETIME=timedelta(hours=SESSION_HOURS),
    )
    app.session_interface = ConsoleSessionInterface()


def add_headers(response: Response) -> Response:
    """The security headers, and ``no-store``: every console page shows job
    data or carries a CSRF token bound to the session (the login form)."""
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    response.headers["Cache-Control"] = "no-store"
    return response
