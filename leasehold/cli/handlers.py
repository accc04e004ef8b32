"""``leasehold handlers list``: the handler catalogue the live workers publish."""

from __future__ import annotations

import json

import click

from leasehold.cli.base import OneLineCommand, OneLineGroup, friendly_errors, runtime
from store.catalogue import catalogue

handlers_group = OneLineGroup("handlers", help="The handlers the live workers serve.")


@handlers_group.command("list", cls=OneLineCommand)
@click.option("--json", "as_json", is_flag=True, help="Print the handlers as JSON.")
@friendly_errors
def handlers_list(as_json: bool) -> None:
    """Each handler a live worker serves: queue, retries, timeout, schedule, workers."""
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
