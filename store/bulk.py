"""Bulk operations on every job matching a filter, run in the background in
bounded batches.

``start`` records the operation (idempotent by its id) and returns at once;
``run_batch`` acts on the next ``batch`` jobs of the filter and saves where
it got to; ``run_pending`` runs queued and running operations under the
``operations`` lock, one instance at a time, within a time budget (a
worker's maintenance task calls it). An operation no worker has advanced for
PICKUP_S seconds is run by whoever watches it (``advance_unattended``: the
web app on each read of it, the ``leasehold job`` command while it follows
it), in the same batches under the same lock, so it finishes without a
worker and, with one, still runs each batch once.

The walk is a keyset listing (``list_jobs``, newest update first) that starts
at the operation's creation time: a job acted on gets a newer update time and
leaves the walk, so a batch that is run again after a crash (its progress
not saved) never acts twice on a job; the counts of such a batch are lost.
Each job is changed by the store's own guarded operation; a job whose
status no longer allows the action is skipped. A filter with an error or
payload search walks the same listing and acts only on the jobs that match
it (``store/bulk_select.py``); one with selected ``ids`` walks those ids in
order, its cursor the number done (a job acted on twice is skipped the
second time: its status no longer allows the action). The audit log gets two
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
from store.bulk_select import (  # noqa: F401 - re-exported: the filter and its count are bulk's
    ACTIONS,
    Preview,
    check_filter,
    matches,
    preview,
    preview_filter,
    search_of,
    searching,
    selected,
    statuses_of,
)
from store.cursor import encode_cursor
from store.errors import InvalidTransition, JobNotFound, StoreError, ValidationError
from store.lifecycle import EventKind, JobStatus, rule
from store.models import BULK_ACTIONS, BulkOperation
from store.spec import MAX_OPERATION_ID_LEN, check_actor

log = logging.getLogger(__name__)

#: Lock bulk operations run under.
OPERATIONS_LOCK = "operations"
#: Jobs one batch acts on (one list_jobs page).
BATCH = 200
#: Actor prefix of the event a bulk operation writes on each job it changes:
#: not ``operator:``, so those events stay in each job's timeline and out of
#: the audit log, which holds the operation's start and end (filter, counts).
JOB_ACTOR_PREFIX = "bulk:"


def job_actor(operation: BulkOperation) -> str:
    """``operator:ann`` -> ``bulk:ann``: the actor of each job's own event."""
    return JOB_ACTOR_PREFIX + operation.actor.removeprefix("operator:")


#: Seconds an unfinished operation may go without progress before its watcher runs it.
PICKUP_S = 3.0


def _call(store: JobStore, action: str) -> Callable[[str, str], Any]:
    calls: dict[str, Callable[[str, str], Any]] = {
        "cancel": lambda job_id, actor: store.cancel(job_id, actor=actor),
        "requeue": lambda job_id, actor: store.requeue(job_id, actor=actor),
        "retry": lambda job_id, actor: store.retry_now(job_id, actor=actor),
        "delete": lambda job_id, actor: store.delete(job_id, actor=actor),
    }
    return calls[action]


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
    shown = {
        k: f"{len(selected(operation.filter))} selected" if k == "ids" else v
        for k, v in operation.filter.items()
    }
    where = ", ".join(f"{k}={v}" for k, v in sorted(shown.items())) or "every job"
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
    if "ids" in operation.filter:
        jobs, next_cursor = _selected_batch(store, operation, batch)
    else:
        status = JobStatus[operation.filter["status"]] if "status" in operation.filter else None
        cursor = operation.cursor or encode_cursor(operation.created_at.timestamp(), "~")
        page = store.list_jobs(
            status=status,
            queue=operation.filter.get("queue"),
            name=operation.filter.get("name"),
            limit=batch,
            cursor=cursor,
        )
        jobs, next_cursor = page.items, page.next_cursor
    if searching(operation.filter):  # error, payload: only the jobs that match now
        query = search_of(operation.filter)
        jobs = [j for j in jobs if matches(j, query)]
    sources, act = rule(ACTIONS[operation.action]).sources, _call(store, operation.action)
    actor = job_actor(operation)
    changed = skipped = 0
    for job in jobs:
        if job.status not in sources:
            skipped += 1
            continue
        try:
            act(job.id, actor)
            changed += 1
        except (InvalidTransition, JobNotFound):
            skipped += 1  # changed by someone else since the page was read
    last = next_cursor is None
    operation = replace(
        operation,
        state="done" if last else "running",
        changed=operation.changed + changed,
        skipped=operation.skipped + skipped,
        cursor=next_cursor if not last else operation.cursor,
    )
    operation = store.save_operation(operation)
    if last:
        store.record_audit(EventKind.BULK_FINISHED, operation.actor, describe(operation))
    return operation


def _selected_batch(store: JobStore, operation: BulkOperation, batch: int) -> tuple[list[Any], str | None]:
    """The next ``batch`` of an operation on selected ids (its cursor: how many
    ids are done), those still in the store; and the next cursor (None at the end)."""
    ids = selected(operation.filter)
    start = int(operation.cursor or 0)
    jobs = []
    for job_id in ids[start : start + batch]:
        try:
            jobs.append(store.get(job_id))
        except JobNotFound:
            continue
    end = start + batch
    return jobs, (str(end) if end < len(ids) else None)


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
                operation = _one_batch(store, operation, batch)
                batches += 1
            if time.monotonic() >= deadline:
                break
    finally:
        store.release_lock(OPERATIONS_LOCK, owner)
    return batches


def _one_batch(store: JobStore, operation: BulkOperation, batch: int) -> BulkOperation:
    """One batch of ``operation``; the caller holds OPERATIONS_LOCK. A store
    error propagates (the next run resumes); any other error fails the
    operation with its text."""
    try:
        return run_batch(store, operation, batch)
    except StoreError:
        raise
    except Exception as exc:  # a bug must not retry forever: stop this operation
        log.exception("bulk operation %s failed", operation.id)
        operation = store.save_operation(replace(operation, state="failed", error=repr(exc)))
        store.record_audit(EventKind.BULK_FINISHED, operation.actor, describe(operation))
        return operation


def unattended(store: JobStore, operation: BulkOperation) -> bool:
    """True when ``operation`` is unfinished and nothing has advanced it for
    PICKUP_S seconds of the store's clock (no worker picked it up, or the one
    running it stopped)."""
    if operation.finished or operation.updated_at is None:
        return False
    return store.now() - operation.updated_at.timestamp() >= PICKUP_S


def advance_unattended(
    store: JobStore, operation: BulkOperation, owner: str, budget_s: float = 2.0, batch: int = BATCH
) -> BulkOperation:
    """Run ``operation`` for up to ``budget_s`` seconds when it is unattended,
    under OPERATIONS_LOCK (nothing when another instance holds it: a worker
    is at it); the operation as it now stands."""
    if not unattended(store, operation):
        return operation
    if not store.acquire_lock(OPERATIONS_LOCK, owner, max(30.0, budget_s * 3)):
        return operation
    try:
        operation = store.get_operation(operation.id) or operation  # as the lock's last holder left it
        deadline = time.monotonic() + budget_s
        while not operation.finished and time.monotonic() < deadline:
            operation = _one_batch(store, operation, batch)
        return operation
    finally:
        store.release_lock(OPERATIONS_LOCK, owner)


def follow(
    store: JobStore,
    operation_id: str,
    owner: str,
    on_progress: Callable[[BulkOperation], None],
    poll_s: float = 0.5,
    batch: int = BATCH,
) -> BulkOperation:
    """Watch an operation to its end, reporting each new state to
    ``on_progress``, and run it (``advance_unattended``) whenever no worker
    does; the finished operation. Raises ValidationError for an unknown id."""
    seen: tuple[Any, ...] | None = None
    while True:
        operation = store.get_operation(operation_id)
        if operation is None:
            raise ValidationError("operation", f"no operation {operation_id!r}")
        operation = advance_unattended(store, operation, owner, batch=batch)
        state = (operation.state, operation.changed, operation.skipped)
        if state != seen:
            on_progress(operation)
            seen = state
        if operation.finished:
            return operation
        time.sleep(poll_s)
