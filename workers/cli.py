"""Flask CLI commands (DESIGN.md section 7): worker, recover, enqueue, stats,
db upgrade, hash-password. ``flask --app wsgi <command> --help`` for each.

Bad input exits non-zero with one line on stderr (``Error: ...``), never a
traceback: click's usage errors are shortened to their message, and store,
handler and recovery errors become ``click.ClickException``.
"""

from __future__ import annotations

import functools
import json
import os
import socket
from collections.abc import Callable
from typing import Any

import click
import orjson
from flask import Flask, current_app
from flask.cli import AppGroup, with_appcontext

from store.errors import StoreError
from store.lifecycle import JobStatus
from store.models import MAX_PRIORITY, MAX_RETRIES_LIMIT, MAX_TIMEOUT_S
from store.recovery import RecoveryBusy, run_recovery
from workers.claim import parse_queues
from workers.config import DEFAULT_GRACE_S, WorkerConfig
from workers.handlers import HandlerError, get_handler, load_handlers
from workers.logs import configure_logging

#: How long ``recover`` waits for a recovery another instance is running, seconds.
RECOVER_LOCK_WAIT_S = 10.0
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


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


class OneLineGroup(_OneLineErrors, AppGroup):
    """A group (``db``) whose errors, and its commands', print on one line."""

    command_class = OneLineCommand


def friendly_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn the errors a command can expect into one-line ClickExceptions."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (StoreError, HandlerError, RecoveryBusy) as exc:
            raise click.ClickException(" ".join(str(exc).split())) from None

    return wrapper


def _store():  # a JobStore
    return current_app.extensions["leasehold"]


def _settings():  # webapp.config.Settings
    return current_app.extensions["leasehold.settings"]


# ------------------------------------------------------------------------ worker
def _queues_option(_ctx: click.Context, param: click.Parameter, value: str) -> list[tuple[str, int]]:
    try:
        return parse_queues(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param=param) from None


@click.command("worker", cls=OneLineCommand)
@click.option(
    "--queues",
    default="default",
    show_default=True,
    callback=_queues_option,
    help="Queues to claim from, with optional weights: a,b:3.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 1024),
    default=None,
    help="Job slots per process [LEASEHOLD_CONCURRENCY, default CPU count].",
)
@click.option(
    "--prefetch",
    type=click.IntRange(0, 4096),
    default=None,
    help="Most jobs to claim ahead of the slots while jobs are short [4 x --concurrency].",
)
@click.option(
    "--processes",
    type=click.IntRange(1, 256),
    default=None,
    help="Run N supervised worker processes (restarted when they die).",
)
@click.option(
    "--lease-ttl",
    type=click.FloatRange(min=0.3, max=MAX_TIMEOUT_S),
    default=None,
    help="Lease TTL in seconds [LEASEHOLD_LEASE_TTL].",
)
@click.option("--burst", is_flag=True, help="Exit 0 once no job is left.")
@click.option("--name", default=None, help="Worker id (default host.pid; children get .1, .2, ...).")
@click.option(
    "--pool",
    type=click.Choice(["thread", "process"]),
    default="thread",
    show_default=True,
    help="Run jobs in threads, or in processes that can be killed on timeout.",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=DEFAULT_GRACE_S,
    show_default=True,
    help="Seconds running jobs get to finish after SIGTERM/SIGINT.",
)
@click.option(
    "--log-level", type=click.Choice(_LEVELS, case_sensitive=False), default="INFO", show_default=True
)
@with_appcontext
@friendly_errors
def worker_command(
    queues: list[tuple[str, int]],
    concurrency: int | None,
    prefetch: int | None,
    processes: int | None,
    lease_ttl: float | None,
    burst: bool,
    name: str | None,
    pool: str,
    grace: float,
    log_level: str,
) -> None:
    """Run a worker: claim jobs, run their handlers, renew their leases."""
    from workers.supervisor import Supervisor
    from workers.worker import run_worker

    settings = _settings()
    if name is not None and not 0 < len(name) <= 150:
        raise click.BadParameter("must be 1 to 150 characters", param_hint="--name")
    configure_logging(log_level)
    if not load_handlers(settings.handlers):
        raise click.UsageError("no handlers are registered: name their modules in LEASEHOLD_HANDLERS")
    config = WorkerConfig(
        store_url=settings.store_url,
        queues=tuple(queues),
        concurrency=concurrency or settings.concurrency,
        prefetch=prefetch,
        pool=pool,  # type: ignore[arg-type]
        lease_ttl_s=lease_ttl or settings.lease_ttl_s,
        name=name,
        burst=burst,
        grace_s=grace,
        handlers=settings.handlers,
        recovery_enabled=settings.recovery_enabled,
        recovery_interval_s=settings.recovery_interval_s,
        recovery_batch=settings.recovery_batch,
        recovery_lock_ttl_s=settings.recovery_lock_ttl_s,
        log_level=log_level.upper(),
        store=settings.store_settings(),
    )
    code = Supervisor(config, processes).run() if processes else run_worker(config)
    raise click.exceptions.Exit(code)


# ----------------------------------------------------------------------- recover
@click.command("recover", cls=OneLineCommand)
@click.option("--dry-run", is_flag=True, help="Show what recovery would do; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@with_appcontext
@friendly_errors
def recover_command(dry_run: bool, as_json: bool) -> None:
    """Recover jobs whose lease expired (retry them, or fail those out of retries)."""
    settings = _settings()
    report = run_recovery(
        _store(),
        owner=f"cli:{socket.gethostname()}:{os.getpid()}",
        trigger="cli",
        batch=settings.recovery_batch,
        lock_ttl_s=settings.recovery_lock_ttl_s,
        dry_run=dry_run,
        wait_s=RECOVER_LOCK_WAIT_S,
    )
    if as_json:
        click.echo(json.dumps(report.to_json()))
        return
    verb = "would be" if dry_run else "were"
    click.echo(f"{len(report.recovered)} job(s) {verb} rescheduled, {len(report.failed)} {verb} failed")
    for r in report.recovered + report.failed:
        click.echo(f"  {r.job_id}  {r.name}  queue={r.queue}  worker={r.worker_id}  -> {r.outcome.name}")
    if report.more:
        click.echo(
            "more expired leases remain" if dry_run else "stopped early; more expired leases may remain"
        )


# ----------------------------------------------------------------------- enqueue
def _payload_option(_ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid JSON ({exc})", param=param) from None


@click.command("enqueue", cls=OneLineCommand)
@click.argument("name")
@click.option("--payload", default=None, callback=_payload_option, help="Job payload as JSON.")
@click.option("--queue", default=None, help="Queue [the handler's, else default].")
@click.option("--max-retries", type=click.IntRange(0, MAX_RETRIES_LIMIT), default=None)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.001, max=MAX_TIMEOUT_S),
    default=None,
    help="Execution timeout, seconds.",
)
@click.option("--delay", type=click.FloatRange(min=0), default=0.0, help="Seconds before it is due.")
@click.option(
    "--priority",
    type=click.IntRange(-MAX_PRIORITY, MAX_PRIORITY),
    default=0,
    help="Higher runs first within its queue.",
)
@with_appcontext
@friendly_errors
def enqueue_command(
    name: str,
    payload: Any,
    queue: str | None,
    max_retries: int | None,
    timeout: float | None,
    delay: float,
    priority: int,
) -> None:
    """Enqueue a job; prints its id alone on stdout."""
    load_handlers(_settings().handlers)
    spec = get_handler(name)
    options = {
        "queue": queue,
        "max_retries": max_retries,
        "timeout_s": timeout,
        "delay_s": delay,
        "priority": priority,
    }
    if spec is not None:
        job_spec = spec.job_spec(payload, **options)
    else:
        from store.models import JobSpec

        job_spec = JobSpec(name, payload, **{k: v for k, v in options.items() if v is not None})
    job, _ = _store().enqueue_idempotent(job_spec)
    click.echo(job.id)


# ------------------------------------------------------------------------- stats
@click.command("stats", cls=OneLineCommand)
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
@with_appcontext
@friendly_errors
def stats_command(as_json: bool) -> None:
    """Job counts by status and by queue."""
    counts = _store().counts()
    if as_json:
        click.echo(json.dumps(counts.to_json()))
        return
    names = [s.name for s in JobStatus]
    width = max([5, *(len(q) for q in counts.by_queue)])
    click.echo(f"{'queue':<{width}}  " + "  ".join(f"{n:>10}" for n in names))
    for queue in sorted(counts.by_queue):
        row = counts.by_queue[queue]
        click.echo(f"{queue:<{width}}  " + "  ".join(f"{row.get(n, 0):>10}" for n in names))
    click.echo(f"{'total':<{width}}  " + "  ".join(f"{counts.by_status.get(n, 0):>10}" for n in names))


# ---------------------------------------------------------------------------- db
db_group = OneLineGroup("db", help="Store schema.")


@db_group.command("upgrade")
@friendly_errors
def db_upgrade_command() -> None:
    """Create or upgrade the SQL schema (Redis keeps no schema)."""
    url = _settings().store_url
    if not url.split(":", 1)[0].lower().startswith(("sqlite", "postgresql")):
        click.echo("this store keeps no schema; nothing to upgrade")
        return
    from sqlalchemy.exc import SQLAlchemyError

    from store.sql import migrate

    try:
        migrate(url)
    except SQLAlchemyError as exc:
        raise click.ClickException(
            f"schema upgrade failed: {' '.join(str(exc.orig or exc).split())}"
        ) from None
    click.echo("schema is up to date")


# ----------------------------------------------------------------- hash-password
@click.command("hash-password", cls=OneLineCommand)
@click.option("--password", default=None, help="The password (prompted for when omitted).")
def hash_password_command(password: str | None) -> None:
    """Print a password hash for LEASEHOLD_USERS (name:hash:role)."""
    from werkzeug.security import generate_password_hash

    if password is None:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    if not password:
        raise click.BadParameter("must not be empty", param_hint="--password")
    click.echo(generate_password_hash(password))


# ------------------------------------------------------------------------ demo
@click.command("demo", cls=OneLineCommand)
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Index only the first N files.")
@click.option("--kill-after", type=click.FloatRange(min=0), default=30.0, show_default=True)
def demo_command(port: int, limit: int | None, kill_after: float) -> None:
    """Run the demo on this app's store (``make demo`` does the set-up first)."""
    from workers import demo

    args = ["--store", _settings().store_url, "--port", str(port), "--kill-after", str(kill_after)]
    raise SystemExit(demo.main([*args, *(["--limit", str(limit)] if limit else [])]))


COMMANDS = (
    worker_command,
    recover_command,
    enqueue_command,
    stats_command,
    db_group,
    hash_password_command,
    demo_command,
)


def init_app(app: Flask) -> None:
    """Register the commands on ``app.cli``."""
    for command in COMMANDS:
        app.cli.add_command(command)


__all__ = ["init_app"]
