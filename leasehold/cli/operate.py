"""Commands for operating over time: ``periodic
list|enable|disable|run NAME`` and ``queue pause|resume QUEUE``."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import click

from leasehold.cli.base import OneLineGroup, friendly_errors, operator, runtime
from store.lifecycle import EventKind
from store.models import JobSpec, Schedule
from workers.handlers import get_handler, load_handlers
from workers.periodic import describe, next_tick
from workers.scheduler import SCHEDULE_HEADER


# ------------------------------------------------------------------ periodic
def _in(seconds: float) -> str:
    """A countdown: ``in 3h 05m``, ``in 12s``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"in {s}s"
    if s < 3600:
        return f"in {s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"in {s // 3600}h {s % 3600 // 60:02d}m"
    return f"in {s // 86400}d {s % 86400 // 3600}h"


def _row(schedule: Schedule, now: float) -> dict[str, Any]:
    """One schedule as ``periodic list`` shows it (and prints with --json)."""
    try:
        tz = ZoneInfo(schedule.timezone)
        after = next_tick(schedule.cron, tz, now) if schedule.enabled else None  # disabled: no next run
    except Exception:  # a stored schedule no worker can read: show it, do not fail the listing
        tz, after = None, None
    last_job, last_status = schedule.last_job_id, None
    if last_job is not None:
        try:
            last_status = runtime().store().get(last_job).status.name
        except Exception:  # pruned by retention, or deleted
            last_status = "gone"
    return {
        "name": schedule.name,
        "handler": schedule.handler,
        "cron": schedule.cron,
        "description": describe(schedule.cron),
        "timezone": schedule.timezone,
        "queue": schedule.queue,
        "enabled": schedule.enabled,
        "catch_up": schedule.catch_up,
        "next_run_at": None if after is None else datetime.fromtimestamp(after, tz).isoformat(),
        "next_run_in_s": None if after is None else round(after - now, 3),
        "last_tick_at": None if schedule.last_tick_at is None else schedule.last_tick_at.isoformat(),
        "last_job_id": last_job,
        "last_job_status": last_status,
    }


def _find(name: str) -> Schedule:
    for schedule in runtime().store().schedules():
        if schedule.name == name:
            return schedule
    raise click.ClickException(f"no periodic job named {name!r} (workers store the declared ones at start)")


periodic_group = OneLineGroup("periodic", help="Periodic jobs: list them, enable, disable or run one now.")


@periodic_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the schedules as JSON.")
@friendly_errors
def periodic_list(as_json: bool) -> None:
    """Each periodic job: its schedule in words, next run, enabled, last job."""
    store = runtime().store()
    now = store.now()
    rows = [_row(s, now) for s in store.schedules()]
    if as_json:
        click.echo(json.dumps(rows))
        return
    if not rows:
        click.echo("no periodic jobs (workers store the declared ones at start)")
        return
    for r in rows:
        state = "enabled" if r["enabled"] else "DISABLED"
        when = "never" if r["next_run_at"] is None else f"{r['next_run_at']} ({_in(r['next_run_in_s'])})"
        last = "none" if r["last_job_id"] is None else f"{r['last_job_id']} ({r['last_job_status']})"
        click.echo(f"{r['name']}  [{state}]  {r['description']} ({r['cron']}, {r['timezone']})")
        click.echo(f"    handler {r['handler']} on {r['queue']}; next run {when}; last job {last}")


def _switch(name: str, enabled: bool) -> None:
    store = runtime().store()
    schedule = store.set_schedule_enabled(name, enabled)
    kind = EventKind.SCHEDULE_ENABLED if enabled else EventKind.SCHEDULE_DISABLED
    store.record_audit(kind, operator(), f"schedule {name}")
    click.echo(f"periodic job {schedule.name} {'enabled' if schedule.enabled else 'disabled'}")


@periodic_group.command("enable")
@click.argument("name")
@friendly_errors
def periodic_enable(name: str) -> None:
    """Enable a periodic job (stored: survives restarts)."""
    _switch(name, True)


@periodic_group.command("disable")
@click.argument("name")
@friendly_errors
def periodic_disable(name: str) -> None:
    """Disable a periodic job: no tick is enqueued until it is enabled again."""
    _switch(name, False)


@periodic_group.command("run")
@click.argument("name")
@friendly_errors
def periodic_run(name: str) -> None:
    """Enqueue a periodic job now, outside its schedule; prints the job's id alone."""
    schedule = _find(name)
    load_handlers(runtime().settings().handlers)
    handler = get_handler(schedule.handler)
    options: dict[str, Any] = {"queue": schedule.queue, "headers": {SCHEDULE_HEADER: schedule.name}}
    if handler is not None:
        spec = handler.job_spec(schedule.payload, **options)
    else:
        spec = JobSpec(schedule.handler, schedule.payload, **options)
    store = runtime().store()
    job, _ = store.enqueue_idempotent(spec)
    store.record_audit(EventKind.SCHEDULE_RUN, operator(), f"schedule {name}: job {job.id} enqueued now")
    click.echo(job.id)


# --------------------------------------------------------------------- queue
queue_group = OneLineGroup("queue", help="List queues; pause or resume one; set its limits.")


@queue_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the queues as JSON.")
@friendly_errors
def queue_list(as_json: bool) -> None:
    """Every queue with jobs or a pause state: paused or active, latency (the
    seconds its oldest Queued job has waited), counts by status."""
    from store.latency import queue_latency
    from store.lifecycle import JobStatus

    store = runtime().store()
    counts = store.counts()
    latency = queue_latency(store, counts)
    states = {q.name: q for q in store.queue_states()}
    rows = []
    for name in sorted(set(counts.by_queue) | set(states)):
        state = states.get(name)
        rows.append(
            {
                "name": name,
                "paused": bool(state and state.paused),
                "changed_by": state.changed_by if state else None,
                "latency_s": round(latency.get(name, 0.0), 3),
                "counts": {s.name: counts.by_queue.get(name, {}).get(s.name, 0) for s in JobStatus},
            }
        )
    if as_json:
        click.echo(json.dumps(rows))
        return
    if not rows:
        click.echo("no queues")
        return
    width = max(5, *(len(r["name"]) for r in rows))
    names = [s.name for s in JobStatus]
    click.echo(f"{'queue':<{width}}  {'state':<7}  {'latency':>9}  " + "  ".join(f"{n:>10}" for n in names))
    for r in rows:
        state = "paused" if r["paused"] else "active"
        counts = "  ".join(f"{r['counts'][n]:>10}" for n in names)
        click.echo(f"{r['name']:<{width}}  {state:<7}  {r['latency_s']:>8g}s  {counts}")


@queue_group.command("pause")
@click.argument("queue")
@friendly_errors
def queue_pause(queue: str) -> None:
    """Stop claims from QUEUE (running jobs finish; enqueue still works)."""
    state = runtime().store().pause_queue(queue, actor=operator())
    click.echo(f"queue {state.name} paused by {state.changed_by}")


@queue_group.command("resume")
@click.argument("queue")
@friendly_errors
def queue_resume(queue: str) -> None:
    """Let workers claim from QUEUE again."""
    state = runtime().store().resume_queue(queue, actor=operator())
    click.echo(f"queue {state.name} resumed by {state.changed_by}")
