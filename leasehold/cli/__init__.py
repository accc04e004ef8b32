"""The ``leasehold`` command: worker, enqueue, recover,
stats, purge, periodic, queue, job, alerts, db upgrade, hash-password, web, demo;
``leasehold --version``. ``leasehold <command> --help``
for each.

A plain click group: it imports no Flask and builds no web app. Settings come
from ``LEASEHOLD_*`` in the environment (``leasehold.settings``), so only ``web``,
which serves the console, needs LEASEHOLD_SECRET_KEY. ``leasehold.cli.flask`` registers
the same commands under ``flask --app wsgi`` with the app's settings and store.
Bad input exits non-zero with one line on stderr (``Error: ...``).
"""

from __future__ import annotations

import click

from leasehold import installed_version
from leasehold.cli.admin import db_group, demo_command, hash_password_command, web_command
from leasehold.cli.alerts import alerts_group
from leasehold.cli.base import RUNTIME_KEY, OneLineGroup, Runtime, runtime
from leasehold.cli.handlers import handlers_group
from leasehold.cli.job import job_group
from leasehold.cli.job_log_command import job_logs_command
from leasehold.cli.jobs import (
    enqueue_command,
    purge_command,
    recover_command,
    stats_command,
    worker_command,
)
from leasehold.cli.limits import limits_command
from leasehold.cli.operate import periodic_group, queue_group
from leasehold.logs import configure_logging, log_format_from_env
from leasehold.settings import ConfigError, check_names

queue_group.add_command(limits_command)
job_group.add_command(job_logs_command)

#: Every command (``leasehold.cli.flask`` registers the same ones under Flask).
COMMANDS: tuple[click.Command, ...] = (
    worker_command,
    enqueue_command,
    recover_command,
    stats_command,
    purge_command,
    periodic_group,
    queue_group,
    job_group,
    handlers_group,
    alerts_group,
    db_group,
    hash_password_command,
    web_command,
    demo_command,
)


def _log_format() -> None:
    """Refuse an unknown LEASEHOLD_* variable before any command runs (a typo
    is never ignored). LEASEHOLD_LOG_FORMAT=json: the commands' own records
    (warnings and up; ``worker`` sets its level) are JSON lines too; text keeps
    Python's default."""
    try:
        check_names()
        log_format = log_format_from_env()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    if log_format == "json":
        configure_logging("WARNING", "json")


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"leasehold {installed_version()}")
        ctx.exit()


#: ``--version``, read when asked (leasehold.installed_version), not at import.
leasehold = click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)(
    OneLineGroup(
        "leasehold",
        help="Leasehold job queue. Settings come from LEASEHOLD_* environment variables.",
        commands={command.name: command for command in COMMANDS},
        callback=_log_format,
    )
)


def main() -> None:
    """Entry point of the ``leasehold`` console script."""
    leasehold(prog_name="leasehold")


__all__ = ["COMMANDS", "RUNTIME_KEY", "Runtime", "leasehold", "main", "runtime"]
