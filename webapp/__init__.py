"""The Leasehold web app: JSON API, ops console, metrics, and the CLI.

``create_app(overrides=None)``: defaults, then ``LEASEHOLD_*`` from the
environment, then ``overrides``; the settings are validated; the store is
opened once per process into ``app.extensions["leasehold"]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Flask

from store import open_store
from webapp.config import DEFAULTS, load_settings


def _resources(name: str) -> str:
    """Where ``templates`` or ``static`` is: inside this package when installed
    (the wheel maps them into ``webapp/``), else the checkout's top-level folder."""
    here = Path(__file__).resolve().parent
    inside = here / name
    return str(inside if inside.is_dir() else here.parent / name)


def create_app(overrides: dict[str, Any] | None = None) -> Flask:
    """Build the app. Raises webapp.config.ConfigError for a bad setting."""
    app = Flask(
        __name__,
        instance_relative_config=False,
        template_folder=_resources("templates"),
        static_folder=_resources("static"),
    )
    app.config.update(DEFAULTS)
    app.config["MAX_CONTENT_LENGTH"] = 1024 * 1024  # bytes; larger bodies get 413
    app.config.from_prefixed_env("LEASEHOLD")
    if overrides:
        app.config.update(overrides)
    settings = load_settings(app.config)
    app.extensions["leasehold.settings"] = settings
    app.extensions["leasehold"] = open_store(settings.store_url, settings.store_settings())

    from webapp import api, cli, console

    cli.init_app(app)
    api.init_app(app)
    console.init_app(app)
    return app
