"""Commands on jobs: worker, recover, enqueue, stats, purge."""

from __future__ import annotations

import json
import os
import socket
from datetime import datetime
from typing import Any

import click
import orjson

from leasehold import hooks
from leasehold.cli.base import OneLineCommand, friendly_errors, operator, runtime
from leasehold.logs import configure_logging
from store.catalogue import Catalogue
from store.lifecycle import TERMINAL, EventKind, JobStatus
from store.models import MAX_PRIORITY, MAX_RETRIES_LIMIT, MAX_TIMEOUT_S, JobSpec
from store.recovery_run import run_recovery
from store.spec import MAX_DELAY_S
from workers.claim import parse_queues
from workers.config import DEFAULT_GRACE_S, WorkerConfig
from workers.handlers import load_handlers, registry, served_queues
from workers.periodic import check_declared

#: How long ``recover`` waits for a recovery another instance is running, seconds.
RECOVER_LOCK_WAIT_S = 10.0
#: Jobs one ``purge`` call deletes at most; the command loops until none is left.
PURGE_BATCH = 1000
#: Default age of the finished jobs ``purge`` deletes, seconds (7 days).
PURGE_OLDER_THAN_S = 7 * 24 * 3600.0
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


# ------------------------------------------------------------------------ worker
def _queues_option(
    _ctx: click.Context, param: click.Parameter, value: str | None
) -> list[tuple[str, int]] | None:
    if value is None:
        return None
    try:
        return parse_queues(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param=param) from None


@click.command("worker", cls=OneLineCommand)
@click.option(
    "--queues",
    default=None,
    callback=_queues_option,
    help="Queues to claim from, with optional weights: a,b:3 [default and every handler's queue].",
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
@friendly_errors
def worker_command(
    queues: list[tuple[str, int]] | None,
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

    settings = runtime().settings()
    if name is not None and not 0 < len(name) <= 150:
        raise click.BadParameter("must be 1 to 150 characters", param_hint="--name")
    configure_logging(log_level)
    if not load_handlers(settings.handlers):
        raise click.UsageError("no handlers are registered: name their modules in LEASEHOLD_HANDLERS")
    check_declared()  # a bad periodic job stops the worker here, on one line
    runtime().store()  # a store without this release's schema stops it here, on one line
    runtime().close()  # the worker (or each of its processes) opens its own
    config = WorkerConfig(
        store_url=settings.store_url,
        queues=tuple(queues or served_queues()),
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
        # One switch for the worker's background store upkeep (no setting of its own yet).
        maintenance_enabled=settings.recovery_enabled,
        maintenance_interval_s=settings.maintenance_interval_s,
        retention_s=tuple((status.name, seconds) for status, seconds in settings.retention_s.items()),
        audit_retention_s=settings.audit_retention_s,
        worker_forget_after_s=settings.worker_forget_after_s,
        log_level=log_level.upper(),
        log_success=settings.log_success,
        unknown_handler_grace_s=settings.unknown_handler_grace_s,
        job_log_lines=settings.job_log_lines,
        store=settings.store_settings(),
    )
    code = Supervisor(config, processes).run() if processes else run_worker(config)
    raise click.exceptions.Exit(code)


# ----------------------------------------------------------------------- recover
@click.command("recover", cls=OneLineCommand)
@click.option("--dry-run", is_flag=True, help="Show what recovery would do; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@friendly_errors
def recover_command(dry_run: bool, as_json: bool) -> None:
    """Recover jobs whose lease expired (retry them, or fail those out of retries)."""
    settings = runtime().settings()
    report = run_recovery(
        runtime().store(),
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


def _time_option(_ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | float | None:
    """``--at``/``--expires-at``: an ISO 8601 time with its UTC offset, or epoch seconds."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(
            "not an ISO 8601 time (2030-01-01T09:00:00Z) or epoch seconds", param=param
        ) from None
    if when.tzinfo is None:
        raise click.BadParameter("give its UTC offset, e.g. 2030-01-01T09:00:00Z", param=param)
    return when


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
    "--at",
    "--run-at",
    "run_at",
    callback=_time_option,
    default=None,
    help="Earliest start (store clock): ISO 8601 with its UTC offset, or epoch seconds. Not with --delay.",
)
@click.option(
    "--expires-at",
    callback=_time_option,
    default=None,
    help="Not started by then, it never runs (Canceled, Expired): ISO 8601 with its offset, or epoch s.",
)
@click.option(
    "--expires-in",
    type=click.FloatRange(min=0.001, max=MAX_DELAY_S),
    default=None,
    help="--expires-at as seconds from now.",
)
@click.option(
    "--priority",
    type=click.IntRange(-MAX_PRIORITY, MAX_PRIORITY),
    default=0,
    help="Higher runs first within its queue.",
)
@click.option(
    "--unique-for",
    type=click.FloatRange(min=0, max=MAX_DELAY_S),
    default=None,
    help="A unique job: while a job with its key is waiting or running, or younger than "
    "this many seconds, print that job's id instead of adding one.",
)
@click.option(
    "--unique-key",
    default=None,
    help="Key of a unique job [with --unique-for alone: the name and the payload].",
)
@click.option(
    "--idempotency-key",
    default=None,
    help="Enqueue at most once with this key: again, print the job it made.",
)
@click.option("--limit-key", default=None, help="Partition key of the queue's per-key limits.")
@click.option(
    "--depends-on",
    multiple=True,
    help="Id of a job this one waits for (repeat for more): Scheduled until the last finishes.",
)
@click.option(
    "--on-parent-failure",
    type=click.Choice(["cancel", "run"]),
    default=None,
    help="What a failed or canceled parent does [cancel].",
)
@friendly_errors
def enqueue_command(
    name: str,
    payload: Any,
    queue: str | None,
    max_retries: int | None,
    timeout: float | None,
    delay: float,
    run_at: datetime | float | None,
    expires_at: datetime | float | None,
    expires_in: float | None,
    priority: int,
    unique_for: float | None,
    unique_key: str | None,
    idempotency_key: str | None,
    limit_key: str | None,
    depends_on: tuple[str, ...],
    on_parent_failure: str | None,
) -> None:
    """Enqueue a job; prints its id alone on stdout (a unique job's existing
    holder of the key, or the job of an idempotency key already used, when
    there is one: then ``existing job`` is said on stderr)."""
    modules = runtime().settings().handlers
    load_handlers(modules)
    options = {
        "queue": queue,
        "max_retries": max_retries,
        "timeout_s": timeout,
        "delay_s": delay,
        "run_at": run_at,
        "expires_at": expires_at,
        "expires_in_s": expires_in,
        "priority": priority,
        "unique_for": unique_for,
        "unique_key": unique_key,
        "idempotency_key": idempotency_key,
        "limit_key": limit_key,
        "depends_on": depends_on or None,
        "on_parent_failure": on_parent_failure,
    }
    given = {k: v for k, v in options.items() if v is not None}
    store = runtime().store()
    # The handler's defaults: its loaded module's (LEASEHOLD_HANDLERS), else the store's catalogue.
    catalogue = Catalogue(store, registry() if modules else None)
    job_spec = catalogue.with_defaults(JobSpec(name, payload, **given), set(given))
    job, created = store.enqueue_idempotent(job_spec)
    if created:
        hooks.announce_enqueued([job])
    else:
        click.echo(f"existing job {job.id} ({job.status.name})", err=True)
    click.echo(job.id)


# ------------------------------------------------------------------------- stats
@click.command("stats", cls=OneLineCommand)
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
@friendly_errors
def stats_command(as_json: bool) -> None:
    """Job counts by status and by queue; a paused queue is marked ``(paused)``
    (``paused`` lists them with --json)."""
    store = runtime().store()
    counts = store.counts()
    paused = sorted(q.name for q in store.queue_states() if q.paused)
    if as_json:
        click.echo(json.dumps({**counts.to_json(), "paused": paused}))
        return
    names = [s.name for s in JobStatus]
    label = {q: f"{q} (paused)" if q in paused else q for q in {*counts.by_queue, *paused}}
    width = max([5, *(len(v) for v in label.values())])
    click.echo(f"{'queue':<{width}}  " + "  ".join(f"{n:>10}" for n in names))
    for queue in sorted(label):
        row = counts.by_queue.get(queue, {})
        click.echo(f"{label[queue]:<{width}}  " + "  ".join(f"{row.get(n, 0):>10}" for n in names))
    click.echo(f"{'total':<{width}}  " + "  ".join(f"{counts.by_status.get(n, 0):>10}" for n in names))


# ------------------------------------------------------------------------- purge
_FINISHED = sorted((s.name for s in TERMINAL), key=lambda n: JobStatus[n].value)


@click.command("purge", cls=OneLineCommand)
@click.option(
    "--older-than",
    type=click.FloatRange(min=0),
    default=PURGE_OLDER_THAN_S,
    show_default=True,
    help="Delete finished jobs last updated more than this many seconds ago.",
)
@click.option(
    "--status",
    multiple=True,
    type=click.Choice(_FINISHED),
    help="Only jobs in this status (repeat for several) [all finished ones].",
)
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@friendly_errors
def purge_command(older_than: float, status: tuple[str, ...], dry_run: bool) -> None:
    """Delete finished jobs (and their events) older than --older-than, in batches.

    Prints how many were deleted (with --dry-run: how many would be)."""
    store = runtime().store()
    statuses = sorted({JobStatus[name] for name in status or _FINISHED}, key=lambda s: s.value)
    if dry_run:
        click.echo(f"{store.count_purgeable(older_than, statuses=statuses)} job(s) would be purged")
        return
    total = 0
    while deleted := store.purge(older_than, limit=PURGE_BATCH, statuses=statuses):
        total += deleted
    ages = ", ".join(f"{s.name} older than {older_than:g} s" for s in statuses)
    store.record_audit(EventKind.JOBS_PURGED, operator(), f"{total:,} jobs purged ({ages})")
    click.echo(f"{total} job(s) purged")
