"""Bulk operations on every job matching a filter, run in the background in
bounded batches (DESIGN.md section 8: ``POST /api/operations``).

``start`` records the operation (idempotent by its id) and returns at once;
``run_batch`` acts on the next ``batch`` jobs of the filter and saves where
it got to; ``run_pending`` runs queued and running operations under the
``operations`` lock, one instance at a time, within a time budget (a
worker's maintenance task calls it).

The walk is a keyset listing (``list_jobs``, newest update first) that starts
at the operation's creation time: a job acted on gets a newer update time and
leaves the walk, so a batch that is run again after a crash (its progress
not saved) never acts twice on a job; the counts of such a batch are lost.
Each job is changed by the store's own guarded operation; a job whose
status no longer allows the action is skipped. The audit log gets two
entries an operation (started, finished: filter and counts), never one a
job: each job's event carries the actor ``bulk:<name>`` (``job_actor``).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from store.base import JobStore
from store.cursor import encode_cursor
from store.errors import InvalidTransition, JobNotFound, StoreError, ValidationError
from store.lifecycle import EventKind, JobStatus, Operation, rule
from store.models import BULK_ACTIONS, BulkOperation
from store.spec import MAX_OPERATION_ID_LEN, check_actor

log = logging.getLogger(__name__)

#: Lock bulk operations run under.
OPERATIONS_LOCK = "operations"
#: Jobs one batch acts on (one list_jobs page).
BATCH = 200
#: The lifecycle operation of each action.
ACTIONS: dict[str, Operation] = {
    "cancel": Operation.CANCEL,
    "requeue": Operation.REQUEUE,
    "retry": Operation.RETRY_NOW,
    "delete": Operation.DELETE,
}
_FILTER_KEYS = ("status", "queue", "name")
#: Actor prefix of the event a bulk operation writes on each job it changes:
#: not ``operator:``, so those events stay in each job's timeline and out of
#: the audit log, which holds the operation's start and end (filter, counts).
JOB_ACTOR_PREFIX = "bulk:"


def job_actor(operation: BulkOperation) -> str:
    """``operator:ann`` -> ``bulk:ann``: the actor of each job's own event."""
    return JOB_ACTOR_PREFIX + operation.actor.removeprefix("operator:")


def _call(store: JobStore, action: str) -> Callable[[str, str], Any]:
    calls: dict[str, Callable[[str, str], Any]] = {
        "cancel": lambda job_id, actor: store.cancel(job_id, actor=actor),
        "requeue": lambda job_id, actor: store.requeue(job_id, actor=actor),
        "retry": lambda job_id, actor: store.retry_now(job_id, actor=actor),
        "delete": lambda job_id, actor: store.delete(job_id, actor=actor),
    }
    return calls[action]


def check_filter(raw: dict[str, Any]) -> dict[str, str]:
    """The filter with its status as a name. Raises ValidationError naming
    ``filter`` (an unknown key) or ``status``."""
    unknown = set(raw) - set(_FILTER_KEYS)
    if unknown:
        raise ValidationError("filter", f"unknown keys {sorted(unknown)}; use {', '.join(_FILTER_KEYS)}")
    out = {k: str(v) for k, v in raw.items() if v not in (None, "")}
    if "status" in out:
        try:
            out["status"] = JobStatus.parse(out["status"]).name
        except ValueError as exc:
            raise ValidationError("status", str(exc)) from None
    return out


def start(
    store: JobStore,
    action: str,
    filter_: dict[str, Any],
    actor: str,
    expected: int,
    operation_id: str | None = None,
) -> BulkOperation:
    """Record a bulk operation to run in the background and return it
    (state queued). With an ``operation_id`` already used, the stored
    operation is returned unchanged. Raises ValidationError (action, filter,
    status, expected, actor, operation_id: 1..MAX_OPERATION_ID_LEN characters)."""
    if action not in BULK_ACTIONS:
        raise ValidationError("action", f"must be one of {', '.join(BULK_ACTIONS)}")
    if isinstance(expected, bool) or not isinstance(expected, int) or expected < 0:
        raise ValidationError("expected", "must be an integer >= 0")
    checked = check_filter(filter_)
    check_actor(actor)
    if operation_id is not None and not 1 <= len(operation_id) <= MAX_OPERATION_ID_LEN:
        raise ValidationError("operation_id", f"must be 1-{MAX_OPERATION_ID_LEN} characters")
    if operation_id is not None:
        found = store.get_operation(operation_id)
        if found is not None:
            return found
    operation = BulkOperation(operation_id or str(uuid.uuid4()), action, checked, actor, expected)
    operation = store.save_operation(operation)
    store.record_audit(EventKind.BULK_STARTED, actor, describe(operation))
    return operation


def describe(operation: BulkOperation) -> str:
    """``requeue of 5,000 jobs (status=Failed, queue=mail)``, for the audit log."""
    where = ", ".join(f"{k}={v}" for k, v in sorted(operation.filter.items())) or "every job"
    text = f"{operation.action} of {operation.expected:,} jobs ({where}), operation {operation.id}"
    if operation.finished:
        text += f": {operation.state}, {operation.changed:,} changed, {operation.skipped:,} skipped"
    return text


def run_batch(store: JobStore, operation: BulkOperation, batch: int = BATCH) -> BulkOperation:
    """Act on the next ``batch`` jobs of ``operation`` and save its progress;
    the operation as saved (state done after its last batch)."""
    if operation.finished:
        return operation
    assert operation.created_at is not None, "a saved operation has its creation time"
    status = JobStatus[operation.filter["status"]] if "status" in operation.filter else None
    cursor = operation.cursor or encode_cursor(operation.created_at.timestamp(), "~")
    page = store.list_jobs(
        status=status,
        queue=operation.filter.get("queue"),
        name=operation.filter.get("name"),
        limit=batch,
        cursor=cursor,
    )
    sources, act = rule(ACTIONS[operation.action]).sources, _call(store, operation.action)
    actor = job_actor(operation)
    changed = skipped = 0
    for job in page.items:
        if job.status not in sources:
            skipped += 1
            continue
        try:
            act(job.id, actor)
            changed += 1
        except (InvalidTransition, JobNotFound):
            skipped += 1  # changed by someone else since the page was read
    last = page.next_cursor is None
    operation = replace(
        operation,
        state="done" if last else "running",
        changed=operation.changed + changed,
        skipped=operation.skipped + skipped,
        cursor=page.next_cursor if not last else operation.cursor,
    )
    operation = store.save_operation(operation)
    if last:
        store.record_audit(EventKind.BULK_FINISHED, operation.actor, describe(operation))
    return operation


def run_pending(store: JobStore, owner: str, budget_s: float = 5.0, batch: int = BATCH) -> int:
    """Run unfinished operations, oldest first, in batches for up to
    ``budget_s`` seconds, holding the OPERATIONS_LOCK (0 when another
    instance holds it). Returns how many batches ran. A store error marks
    nothing failed (the next run resumes); any other error fails that
    operation with the error's text."""
    if not store.acquire_lock(OPERATIONS_LOCK, owner, max(30.0, budget_s * 3)):
        return 0
    batches, deadline = 0, time.monotonic() + budget_s
    try:
        for operation in store.operations(limit=20, unfinished=True):
            while not operation.finished and time.monotonic() < deadline:
                try:
                    operation = run_batch(store, operation, batch)
                except StoreError:
                    raise
                except Exception as exc:  # a bug must not retry forever: stop this operation
                    log.exception("bulk operation %s failed", operation.id)
                    operation = store.save_operation(replace(operation, state="failed", error=repr(exc)))
                    store.record_audit(EventKind.BULK_FINISHED, operation.actor, describe(operation))
                batches += 1
            if time.monotonic() >= deadline:
                break
    finally:
        store.release_lock(OPERATIONS_LOCK, owner)
    return batches
