"""gunicorn settings for the Leasehold web app: ``gunicorn -c python:webapp.gunicorn_conf leasehold.wsgi:app``
(what ``leasehold web`` runs), or ``gunicorn -c gunicorn.conf.py wsgi:app`` in a checkout.

Every value can be changed from the environment (a bad value stops the
start with the variable's name):

LEASEHOLD_WEB_BIND             address to listen on (default 127.0.0.1:8000: put a TLS proxy in front)
LEASEHOLD_WEB_WORKERS          worker processes (default 2 * cores + 1, at most 8)
LEASEHOLD_WEB_THREADS          threads per worker (default 4; gthread worker)
LEASEHOLD_WEB_TIMEOUT          seconds a request may take before its worker is restarted (default 30)
LEASEHOLD_FORWARDED_ALLOW_IPS  the TLS proxy's addresses, trusted for X-Forwarded-* (default: none)
LEASEHOLD_WEB_ACCESSLOG        "-" for stdout (default), a file path, or "off"
LEASEHOLD_WEB_LOGLEVEL         gunicorn's error log level (default info)

Loading this file also validates every LEASEHOLD_* setting of the app (the
same model the app, the worker and the CLI read: ``leasehold.settings`` and
``webapp.config``), so a bad one stops gunicorn's master with one line naming
the variable before any worker starts. The client address the app sees behind
the proxy is set by LEASEHOLD_TRUSTED_PROXIES (werkzeug's ProxyFix in the app);
LEASEHOLD_FORWARDED_ALLOW_IPS only tells gunicorn whom to trust for the scheme.

Each worker process opens its own store connection pool (``preload_app`` is
off so no connection is shared across fork). The access log never records
request headers, so bearer tokens and session cookies stay out of it.
"""

from __future__ import annotations

import os

from leasehold.logs import gunicorn_logconfig
from leasehold.settings import PREFIX, check_names, env_config, load_settings, parse_number
from webapp.config import ConfigError, load_web_settings


def _int(name: str, default: int, low: int, high: int) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        return int(parse_number(name.removeprefix(PREFIX), raw, low, integer=True, high=high))
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None


def _check_app_settings() -> None:
    """Stop with one line naming the variable if any LEASEHOLD_* setting is bad or unknown."""
    config = env_config()
    try:
        check_names()
        load_settings(config)
        load_web_settings(config)
    except ConfigError as exc:
        raise SystemExit(f"Error: {exc}") from None


_check_app_settings()


def default_workers() -> int:
    """2 * cores + 1 (gunicorn's rule of thumb), capped at 8."""
    return min(2 * (os.cpu_count() or 1) + 1, 8)


bind = [os.environ.get("LEASEHOLD_WEB_BIND", "127.0.0.1:8000")]
workers = _int("LEASEHOLD_WEB_WORKERS", default_workers(), 1, 64)
threads = _int("LEASEHOLD_WEB_THREADS", 4, 1, 64)
worker_class = "gthread"
timeout = _int("LEASEHOLD_WEB_TIMEOUT", 30, 1, 3600)
graceful_timeout = timeout
keepalive = 5
preload_app = False
# No control socket: its default path is shared by every gunicorn of the user,
# so two deployments (or test runs) on one machine would fight over it.
control_socket_disable = True

# Behind a TLS proxy: trust X-Forwarded-Proto/For only from the proxy's addresses.
forwarded_allow_ips = os.environ.get("LEASEHOLD_FORWARDED_ALLOW_IPS", "")

# Access log to stdout (LEASEHOLD_WEB_ACCESSLOG=off to disable, or a file path).
# No %({header}i) atoms: Authorization and Cookie never reach a log.
_accesslog = os.environ.get("LEASEHOLD_WEB_ACCESSLOG", "-").strip()
accesslog = None if _accesslog in ("", "off") else _accesslog
access_log_format = '%(h)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(B)s %(M)sms "%(a)s"'
errorlog = "-"
loglevel = os.environ.get("LEASEHOLD_WEB_LOGLEVEL", "info")
# LEASEHOLD_LOG_FORMAT=json: gunicorn's error and access logs and the app's records as JSON lines.
logconfig_dict = gunicorn_logconfig(load_web_settings(env_config()).log_format, loglevel) or {}

#: The app's body limit (LEASEHOLD_MAX_CONTENT_LENGTH, bytes): larger bodies get 413 unread.
max_body_bytes = load_web_settings(env_config()).max_content_length


def pre_request(worker: object, req: object) -> None:
    """A request whose body is past the app's limit is answered 413 without
    reading it, and gunicorn drains only 64 KiB of an unread body before it
    closes the connection: so that answer says ``Connection: close`` and a
    pooling client opens a new connection instead of writing to a dead one.
    (Bodies within the limit the app reads or discards: ``webapp.drain_unread_body``.)"""
    headers = dict(getattr(req, "headers", []))
    length = headers.get("CONTENT-LENGTH", "")
    if length.isdigit() and int(length) > max_body_bytes:
        req.must_close = True  # type: ignore[attr-defined]


# Request limits (bytes / counts); bodies are limited by MAX_CONTENT_LENGTH in the app.
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190
