"""``leasehold job logs ID [--attempt N] [--follow] [--json]``: the lines a
job's handler logged with ``ctx.log`` (store/job_logs.py), oldest first;
``--follow`` keeps reading every FOLLOW_POLL_S until the job is finished
(and its last lines are read). Bad input exits non-zero with one line."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import click

from leasehold.cli.base import friendly_errors, runtime
from store.job_logs import read_logs
from store.lifecycle import TERMINAL

#: Seconds between two reads of ``--follow`` (one store read each).
FOLLOW_POLL_S = 1.0


def _line(line: dict, as_json: bool) -> str:
    if as_json:
        return json.dumps(line)
    at = datetime.fromtimestamp(line["at"], UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    return f"{at} #{line['attempt']} {line['level']:<8} {line['message']}"


@click.command("logs")
@click.argument("job_id")
@click.option(
    "--attempt", type=click.IntRange(min=1), default=None, help="Only this attempt (1: the first run)."
)
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines until the job is finished.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line.")
@friendly_errors
def job_logs_command(job_id: str, attempt: int | None, follow: bool, as_json: bool) -> None:
    """Print a job's log lines (ctx.log), by attempt."""
    store = runtime().store()
    after = 0
    while True:
        finished = store.get(job_id).status in TERMINAL  # before the read: its last lines are in it
        while True:
            lines, after = read_logs(store, job_id, attempt, after)
            for line in lines:
                click.echo(_line({**line, "at": float(line["at"])}, as_json))
            if not lines:
                break
        if not follow or finished:
            return
        time.sleep(FOLLOW_POLL_S)
