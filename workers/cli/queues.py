"""``leasehold queue list``: each queue's jobs by status, pause state and
latency (added to the ``queue`` group of workers.cli.operate)."""

from __future__ import annotations

import json

import click

from store.latency import queue_latency
from store.lifecycle import JobStatus
from workers.cli.base import OneLineCommand, friendly_errors, runtime
from workers.cli.operate import queue_group


@queue_group.command("list", cls=OneLineCommand)
@click.option("--json", "as_json", is_flag=True, help="Print the queues as JSON.")
@friendly_errors
def queue_list(as_json: bool) -> None:
    """Each queue with jobs or a pause state: paused or running, latency
    (seconds its oldest Queued job has waited), jobs by status."""
    store = runtime().store()
    counts = store.counts()
    latency = queue_latency(store, counts)
    states = {q.name: q for q in store.queue_states()}
    rows = [
        {
            "name": name,
            "paused": bool(states.get(name) and states[name].paused),
            "latency_s": round(latency.get(name, 0.0), 3),
            "counts": {s.name: counts.by_queue.get(name, {}).get(s.name, 0) for s in JobStatus},
        }
        for name in sorted(set(counts.by_queue) | set(states))
    ]
    if as_json:
        click.echo(json.dumps(rows))
        return
    if not rows:
        click.echo("no queue has jobs")
        return
    for r in rows:
        state = "PAUSED" if r["paused"] else "running"
        shown = ", ".join(f"{k} {v}" for k, v in r["counts"].items() if v) or "no jobs"
        click.echo(f"{r['name']}  [{state}]  latency {r['latency_s']:g}s  {shown}")
