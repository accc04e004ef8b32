"""``leasehold job``: show one job, or act on it (cancel, requeue, retry,
delete); act on every job of a filter as a bulk operation (``--status``,
``--queue``, ``--name``): the count is previewed, confirmed (``--yes`` skips
the prompt), and the operation followed to its end, run by this command
when no worker picks it up (``store.bulk.follow``).

Exit codes: 0 done, 1 refused (no such job, a status that does not allow
the action, a declined prompt), 2 bad usage.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Callable
from typing import Any

import click

from leasehold.cli.base import OneLineGroup, OneLineUsageError, friendly_errors, runtime
from leasehold.cli.operate import operator
from store import bulk
from store.base import JobStore
from store.lifecycle import JobStatus
from store.models import BulkOperation, Job

job_group = OneLineGroup("job", help="Show a job, or cancel, requeue, retry or delete one or many.")

#: Single-job calls of each action; the store's own guarded operations.
_ACT: dict[str, Callable[[JobStore, str, str], Job | None]] = {
    "cancel": lambda store, job_id, actor: store.cancel(job_id, actor=actor),
    "requeue": lambda store, job_id, actor: store.requeue(job_id, actor=actor),
    "retry": lambda store, job_id, actor: store.retry_now(job_id, actor=actor),
    "delete": lambda store, job_id, actor: store.delete(job_id, actor=actor),
}
_STATUSES = [s.name for s in JobStatus]


def _job_json(store: JobStore, job: Job) -> dict[str, Any]:
    return {**job.to_json(), "attempts": [a.to_json() for a in store.attempts(job.id)]}


#: Characters never printed as they are (C0 and C1 controls, bidirectional
#: overrides and line separators): text from handlers and workers could move
#: the cursor, recolour or rewrite the operator's terminal.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028-\u202e\u2066-\u2069]")


def safe(value: object) -> str:
    """``value`` as text with every unsafe character escaped, as ``\\x1b`` or ``\\u202e``."""

    def escape(m: re.Match[str]) -> str:
        code = ord(m.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _UNSAFE.sub(escape, str(value))


#: Statuses whose run started and has not been counted as a failure yet.
_RUN_NOT_FAILED = (JobStatus.InProgress, JobStatus.Completed)


def runs(job: Job) -> int:
    """Attempts started: the failed ones (``retry_count``) and the one that
    is running or succeeded."""
    return job.retry_count + (job.status in _RUN_NOT_FAILED)


def _print_job(job: Job) -> None:
    click.echo(f"{job.id}  {safe(job.name)}  queue={safe(job.queue)}  status={job.status.name}")
    click.echo(f"  attempts {runs(job)} of {job.max_retries + 1}")
    click.echo(f"  created {job.created_at.isoformat() if job.created_at else '-'}")
    if job.worker_id:
        click.echo(f"  worker {safe(job.worker_id)} (token {job.lease_token})")
    if job.error:
        click.echo(f"  error {safe(job.error.get('type'))}: {safe(job.error.get('message'))}")
    if job.result is not None:
        click.echo(f"  result {safe(json.dumps(job.result))}")


@job_group.command("show")
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print the job as the API's JSON.")
@friendly_errors
def job_show(job_id: str, as_json: bool) -> None:
    """Show one job: status, attempts, worker, error, result."""
    store = runtime().store()
    job = store.get(job_id)
    if as_json:
        click.echo(json.dumps(_job_json(store, job)))
    else:
        _print_job(job)


def _filter_of(status: str | None, queue: str | None, name: str | None) -> dict[str, str]:
    return {k: v for k, v in (("status", status), ("queue", queue), ("name", name)) if v}


def _progress_line(operation: BulkOperation) -> str:
    return (
        f"operation {operation.id}: {operation.state}, {operation.changed} changed, "
        f"{operation.skipped} skipped of {operation.expected}"
    )


def _run_bulk(action: str, where: dict[str, str], yes: bool, as_json: bool) -> None:
    store = runtime().store()
    status = JobStatus[where["status"]] if "status" in where else None
    count = bulk.preview(store, action, status, where.get("queue"), where.get("name")).eligible
    described = ", ".join(f"{k}={v}" for k, v in where.items())
    click.echo(f"{action}: {count} job(s) match ({described})", err=as_json)
    if not yes and not click.confirm(f"{action} {count} job(s)?", err=True):
        raise click.ClickException("not confirmed; nothing changed")
    operation = bulk.start(store, action, where, operator(), count)
    owner = f"cli:{socket.gethostname()}:{os.getpid()}"

    def report(op: BulkOperation) -> None:
        if not as_json:
            click.echo(_progress_line(op))

    done = bulk.follow(store, operation.id, owner, report)
    if as_json:
        click.echo(json.dumps(done.to_json()))
    if done.state == "failed":
        raise click.ClickException(f"operation {done.id} failed: {done.error}")


def _action_command(action: str, help_text: str) -> click.Command:
    @job_group.command(action, help=help_text)
    @click.argument("job_id", required=False)
    @click.option("--status", type=click.Choice(_STATUSES), default=None, help="Every job in this status.")
    @click.option("--queue", default=None, help="Every job of this queue.")
    @click.option("--name", default=None, help="Every job of this handler name.")
    @click.option("--yes", is_flag=True, help="Do not ask before a bulk action.")
    @click.option("--json", "as_json", is_flag=True, help="Print the job (or the operation) as JSON.")
    @friendly_errors
    def command(
        job_id: str | None, status: str | None, queue: str | None, name: str | None, yes: bool, as_json: bool
    ) -> None:
        where = _filter_of(status, queue, name)
        if job_id is not None and where:
            raise OneLineUsageError("give a job id or --status/--queue/--name, not both")
        if job_id is None and not where:
            raise OneLineUsageError("give a job id, or --status/--queue/--name for a bulk action")
        if job_id is None:
            _run_bulk(action, where, yes, as_json)
            return
        store = runtime().store()
        job = _ACT[action](store, job_id, operator())
        if job is None:  # deleted
            click.echo(json.dumps({"id": job_id, "deleted": True}) if as_json else f"{job_id} deleted")
        elif as_json:
            click.echo(json.dumps(_job_json(store, job)))
        else:
            click.echo(f"{job.id} {job.status.name}")

    return command


job_cancel = _action_command("cancel", "Cancel a job (or every job of a filter).")
job_requeue = _action_command(
    "requeue", "Put a job back in its queue, retries reset (or every job of a filter)."
)
job_retry = _action_command("retry", "Run a Failed or Scheduled job now (or every job of a filter).")
job_delete = _action_command("delete", "Delete a job that is not running (or every job of a filter).")
