"""What every ``leasehold`` command shares: one-line errors, and where its
settings and store come from (the environment, or a Flask app).

Bad input exits non-zero with one line on stderr (``Error: ...``), never a
traceback: click's usage errors are shortened to their message, and store,
handler, recovery and configuration errors become ``click.ClickException``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import click

from leasehold.settings import ConfigError, Settings, settings_from_env
from store import open_store
from store.base import JobStore
from store.errors import StoreError
from store.recovery_run import RecoveryBusy
from store.schema_version import check_schema
from workers.handlers import HandlerError

#: Key of the command's Runtime in ``click.Context.meta`` (shared by a whole command line).
RUNTIME_KEY = "leasehold.runtime"


# --------------------------------------------------------------- one-line errors
class OneLineUsageError(click.UsageError):
    """A usage error shown as ``Error: message`` alone (no usage block)."""

    def show(self, file: Any = None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True)


def _one_line(exc: click.UsageError) -> OneLineUsageError:
    text = " ".join(exc.format_message().split())
    return OneLineUsageError(text, exc.ctx)


class _OneLineErrors:
    """Mixin: parameter and usage errors of a command (or group) print on one line."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ):
        try:
            return super().make_context(info_name, args, parent, **extra)  # type: ignore[misc]
        except OneLineUsageError:
            raise
        except click.UsageError as exc:
            raise _one_line(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except OneLineUsageError:
            raise
        except click.UsageError as exc:
            raise _one_line(exc) from None


class OneLineCommand(_OneLineErrors, click.Command):
    """A command whose errors print on one line."""


class OneLineGroup(_OneLineErrors, click.Group):
    """A group (``leasehold``, ``db``) whose errors, and its commands', print on one line."""

    command_class = OneLineCommand


def friendly_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn the errors a command can expect into one-line ClickExceptions."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (StoreError, HandlerError, RecoveryBusy, ConfigError) as exc:
            raise click.ClickException(" ".join(str(exc).split())) from None

    return wrapper


# ----------------------------------------------------------------------- runtime
class Runtime:
    """Where a command finds its settings and its store.

    The ``leasehold`` script's: settings from ``LEASEHOLD_*`` in the environment
    (no Flask app, no LEASEHOLD_SECRET_KEY), the store opened on first use and
    closed when the command line ends. Under Flask (``leasehold.cli.flask``) a subclass
    hands out the app's validated settings and its store instead."""

    def __init__(self) -> None:
        self._settings: Settings | None = None
        self._store: JobStore | None = None

    def settings(self) -> Settings:
        """Raises ConfigError naming a bad variable."""
        if self._settings is None:
            self._settings = settings_from_env()
        return self._settings

    def store(self) -> JobStore:
        """Raises ConfigError or the store's ValidationError for a bad URL,
        SchemaMismatch when the store lacks this release's schema."""
        if self._store is None:
            settings = self.settings()
            store = open_store(settings.store_url, settings.store_settings())
            try:
                check_schema(store, settings.store_url)
            except BaseException:
                store.close()
                raise
            self._store = store
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def operator() -> str:
    """The actor recorded for an operator action from the command line:
    ``operator:cli:<login name>`` (an ``operator:`` actor, so it reaches the
    audit log, named apart from a console user or API token of the same name)."""
    return f"operator:cli:{os.environ.get('USER') or 'unknown'}"


def runtime() -> Runtime:
    """The current command line's Runtime (created from the environment when
    no Flask app put one in ``ctx.meta``)."""
    ctx = click.get_current_context()
    found = ctx.meta.get(RUNTIME_KEY)
    if found is None:
        found = ctx.meta[RUNTIME_KEY] = Runtime()
        ctx.find_root().call_on_close(found.close)
    return found
