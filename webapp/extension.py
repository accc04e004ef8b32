"""The console and the JSON API as a Flask extension, for a host app or our own.

::

    from webapp import Leasehold

    def who() -> tuple[str, str] | None:          # the host's own login decides
        if not current_user.is_authenticated:
            return None
        return ("operator" if current_user.is_admin else "viewer", current_user.email)

    ops = Leasehold(url_prefix="/ops", authorize=who, login_url="/login")
    ops.init_app(app)

``init_app`` registers two blueprints under the prefix (``console`` at
``/ops/``, ``api`` at ``/ops/api/…``, ``/ops/metrics``…) and touches nothing
else of the host: no session interface, no app-wide hooks, headers, CSP or
error handlers (each lives on its blueprint), no app-wide template filters
(the console renders with its own overlay of the host's Jinja environment,
so the host's ``base.html`` does not shadow ours), and the console's CSRF
tokens live in the host's session under one key. The API takes bearer tokens
only (``LEASEHOLD_API_TOKENS``), never the host's session.

Settings: ``LEASEHOLD_*`` keys of the host's ``app.config`` (``LEASEHOLD_STORE_URL``…),
else the ``LEASEHOLD_*`` environment, validated like every process's.

Behind a proxy: the extension does not wrap the host's ``app.wsgi_app``. A host
behind N proxies applies ``werkzeug.middleware.proxy_fix.ProxyFix`` itself (or
passes ``proxy_fix=True`` to let the extension apply ``LEASEHOLD_TRUSTED_PROXIES``
and ``LEASEHOLD_TRUST_FORWARDED_HOST`` to the whole app); the standalone app
(``create_app``) always applies it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix

from leasehold.settings import PREFIX, env_config
from leasehold.urls import store_kind
from store import open_store
from store.base import JobStore
from store.transactions import same_database
from webapp.config import (
    WEB_DEFAULTS,
    ConfigError,
    WebSettings,
    load_settings,
    load_web_settings,
)

#: Called on every console request; returns ``(role, user name)`` with role
#: ``viewer`` or ``operator``, or None when nobody (allowed) is logged in.
Authorize = Callable[[], "tuple[str, str] | None"]

log = logging.getLogger(__name__)


def host_config(app: Flask) -> dict[str, Any]:
    """The extension's settings in a host app: the ``LEASEHOLD_*`` environment,
    overridden by ``LEASEHOLD_*`` keys of ``app.config`` (prefix dropped)."""
    config: dict[str, Any] = env_config()
    for key, value in app.config.items():
        if key.startswith(PREFIX):
            config[key.removeprefix(PREFIX)] = value
    return config


class Leasehold:
    """Mounts the console and the API in a Flask app (``init_app`` style).

    ``authorize``: the host's hook (see ``Authorize``); None means the
    console's own logins (``LEASEHOLD_USERS`` at ``<prefix>/login``), which
    the standalone app uses. ``login_url``: where a visitor the hook refuses
    is sent (``?next=`` added); None answers 401. ``config``: the settings
    (keys without the prefix) instead of the host's. ``store``: an open store
    to use instead of opening ``LEASEHOLD_STORE_URL``. ``db``: the host's
    Flask-SQLAlchemy object (``db.init_app(app)`` done first): when the
    store is a PostgreSQL store of the database of ``db.engine``, the store
    runs on that engine and its pool, opening none of its own (SQLite and
    Redis stores keep their own connections; see ``host_engine``). Jobs
    join ``db.session``'s transaction with ``enqueue(..., session=db.session)``
    on any store (workers/sessions.py)."""

    def __init__(
        self,
        app: Flask | None = None,
        *,
        url_prefix: str = "/ops",
        authorize: Authorize | None = None,
        login_url: str | None = None,
        config: Mapping[str, Any] | None = None,
        store: JobStore | None = None,
        db: Any = None,
        api: bool = True,
        proxy_fix: bool = False,
    ) -> None:
        self.url_prefix = url_prefix.rstrip("/")
        self.authorize = authorize
        self.login_url = login_url
        self.config = config
        self.store = store
        self.db = db
        self.api = api
        self.proxy_fix = proxy_fix
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Validate the settings, open the store and register the blueprints.
        Raises ConfigError naming the first bad ``LEASEHOLD_*`` setting."""
        if "leasehold" in app.extensions:
            raise RuntimeError("Leasehold is already mounted on this app (one mount per app)")
        config = dict(self.config) if self.config is not None else host_config(app)
        settings = load_settings(config)
        web = load_web_settings(config)
        if self.authorize is None and not app.secret_key and not app.testing:
            raise ConfigError(
                "LEASEHOLD_SECRET_KEY must be set (a long random string; it signs console sessions "
                "and CSRF tokens), e.g. python -c 'import secrets; print(secrets.token_hex(32))'"
            )
        app.extensions["leasehold.settings"] = settings
        app.extensions["leasehold.web"] = web
        app.extensions["leasehold.mount"] = self
        store = self.store
        if store is None:
            engine = host_engine(app, self.db, settings.store_url) if self.db is not None else None
            options = {"engine": engine} if engine is not None else {}
            store = open_store(settings.store_url, settings.store_settings(), **options)
        app.extensions["leasehold"] = store
        if self.proxy_fix:
            apply_proxy_fix(app, web)

        from webapp import api, console

        if self.api:
            api.init_app(app, web, url_prefix=self.url_prefix, owns_app=self.owns_app)
        console.init_app(app, web, url_prefix=self.url_prefix, authorize=self.authorize)

    @property
    def owns_app(self) -> bool:
        """True for the standalone app: it may install app-wide routing-error handling."""
        return self.url_prefix == "" and self.authorize is None


def host_engine(app: Flask, db: Any, store_url: str) -> Any:
    """The engine of the host's Flask-SQLAlchemy ``db`` when the store at
    ``store_url`` should run on it: a PostgreSQL store of the same database
    through psycopg 3 (its pool is the host's then). None otherwise: another
    database or driver (``session=`` needs psycopg 3 too), Redis, or SQLite
    (the store's SQLite writes begin ``BEGIN IMMEDIATE`` under its writer
    lock, and a file has no server connections to save).
    Raises ConfigError when ``db`` is not initialised on ``app``."""
    try:
        with app.app_context():
            engine = db.engine
    except (RuntimeError, KeyError, AttributeError) as exc:
        raise ConfigError(f"Leasehold(app, db=db): call db.init_app(app) first ({exc})") from None
    shareable = (engine.dialect.name, engine.dialect.driver) == ("postgresql", "psycopg")
    if not shareable or store_kind(store_url) != "sql":
        return None
    return engine if same_database(engine.url, store_url) else None


def apply_proxy_fix(app: Flask, web: WebSettings) -> None:
    """Trust ``X-Forwarded-For`` and ``X-Forwarded-Proto`` from
    ``LEASEHOLD_TRUSTED_PROXIES`` hops (none by default, so a client cannot
    pick its own address), and ``X-Forwarded-Host`` from as many only with
    ``LEASEHOLD_TRUST_FORWARDED_HOST`` (the host a client names would reach
    every URL the app builds, and the CSRF check's same-origin test)."""
    hops = web.trusted_proxies
    if hops:
        x_host = hops if web.trust_forwarded_host else 0
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=x_host)  # type: ignore[method-assign]


__all__ = ["WEB_DEFAULTS", "Authorize", "Leasehold", "apply_proxy_fix", "host_config", "host_engine"]
