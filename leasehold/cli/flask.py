"""The ``leasehold`` commands under Flask's CLI: ``flask --app wsgi <command>``.

One implementation, two entry points: the commands are those of
``leasehold.cli`` (the ``leasehold`` script). Here each runs inside the app's
context and takes the app's validated settings and its store
(``app.extensions``) instead of reading the environment itself.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import click
from flask import Flask, current_app
from flask.cli import with_appcontext

from leasehold import cli
from leasehold.settings import Settings
from store.base import JobStore
from store.schema_version import check_schema
from webapp import create_app


class AppRuntime(cli.Runtime):
    """Settings and store of the Flask app in context; the app closes its store."""

    def __init__(self, app: Flask) -> None:
        super().__init__()
        self.app = app

    def settings(self) -> Settings:
        return self.app.extensions["leasehold.settings"]

    def store(self) -> JobStore:
        """The app's store; raises SchemaMismatch when it lacks this release's schema."""
        store = self.app.extensions["leasehold"]
        if not self.app.extensions.get("leasehold.schema_checked"):
            check_schema(store, self.settings().store_url)
            self.app.extensions["leasehold.schema_checked"] = True
        return store

    def close(self) -> None:
        pass


def _with_app(callback: Callable[..., Any]) -> Callable[..., Any]:
    """``callback`` run in the app context with an AppRuntime for ``runtime()``."""

    @with_appcontext
    @functools.wraps(callback)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        ctx.meta[cli.RUNTIME_KEY] = AppRuntime(current_app._get_current_object())  # type: ignore[attr-defined]
        return callback(*args, **kwargs)

    return wrapper


def in_app(command: click.Command) -> click.Command:
    """A copy of ``command`` (a group: with copies of its commands) whose
    callbacks run in the Flask app's context."""
    bound = copy.copy(command)
    if isinstance(command, click.Group):
        bound.commands = {name: in_app(sub) for name, sub in command.commands.items()}  # type: ignore[attr-defined]
    elif command.callback is not None:
        bound.callback = _with_app(command.callback)
    return bound


def init_app(app: Flask) -> None:
    """Register every ``leasehold`` command on ``app.cli``."""
    for command in cli.COMMANDS:
        app.cli.add_command(in_app(command))


def create_cli_app(overrides: dict[str, Any] | None = None) -> Flask:
    """``webapp.create_app(overrides)`` with every ``leasehold`` command on its
    ``app.cli`` (what ``flask --app wsgi`` runs). Raises ConfigError for a bad setting."""
    app = create_app(overrides)
    init_app(app)
    return app
