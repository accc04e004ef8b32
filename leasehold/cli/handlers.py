"""``leasehold handlers list``: the handler catalogue the live workers publish."""

from __future__ import annotations

import json
from typing import Any

import click

from leasehold.cli.base import OneLineCommand, OneLineGroup, friendly_errors, runtime
from store.catalogue import catalogue

handlers_group = OneLineGroup("handlers", help="The handlers the live workers serve.")


@handlers_group.command("list", cls=OneLineCommand)
@click.option("--json", "as_json", is_flag=True, help="Print the handlers as JSON.")
@friendly_errors
def handlers_list(as_json: bool) -> None:
    """Each handler a live worker serves: queue, retries, timeout, schedule, workers, retry policy."""
    entries = [entry.to_json() for entry in catalogue(runtime().store()).values()]
    if as_json:
        click.echo(json.dumps(entries))
        return
    if not entries:
        click.echo("no live worker publishes its handlers")
        return
    for e in entries:
        retries = "default" if e["max_retries"] is None else e["max_retries"]
        timeout = "default" if e["timeout_s"] is None else f"{e['timeout_s']:g}s"
        schedule = f"; schedule {e['schedule']}" if e["schedule"] else ""
        click.echo(f"{e['name']}  queue {e['queue']}; max retries {retries}; timeout {timeout}{schedule}")
        click.echo(f"    served by {len(e['workers'])} live worker(s): {', '.join(e['workers'])}")
        policy = _policy(e)
        if policy:
            click.echo(f"    retry policy: {policy}")


def _policy(entry: dict[str, Any]) -> str:
    """A handler's own retry policy in words ("" when it leaves the store's
    backoff and sets no exception types): ``base 30s, max delay 600s,
    jitter default; retries only KeyError; fails at once on ValueError``."""
    base, cap, jitter = entry["retry_base_s"], entry["retry_max_delay_s"], entry["retry_jitter"]
    parts = []
    if (base, cap, jitter) != (None, None, None):
        parts.append(f"base {_shown(base, 's')}, max delay {_shown(cap, 's')}, jitter {_shown(jitter)}")
    if entry["retry_on"]:
        parts.append(f"retries only {', '.join(entry['retry_on'])}")
    if entry["give_up_on"]:
        parts.append(f"fails at once on {', '.join(entry['give_up_on'])}")
    return "; ".join(parts)


def _shown(value: float | None, unit: str = "") -> str:
    return "default" if value is None else f"{value:g}{unit}"
