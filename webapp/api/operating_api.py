"""API views for operating over months: delete a job,
pause and resume queues, purge finished jobs, periodic-job schedules.

Registered by ``webapp.api.routes`` (its ROUTES table); authentication and
roles are the blueprint's (GET viewer, everything else operator), and every
action is recorded with the token's actor ``operator:<name>``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from flask import Response, current_app

from store.latency import queue_latency
from store.lifecycle import TERMINAL, EventKind, JobStatus
from store.maintenance import RETENTION_LOCK, MaintenanceBusy, RunLock
from store.models import MaintenanceRun, QueueState, ts
from webapp import periodic
from webapp.api.auth import current_token
from webapp.api.common import context_of, job_json, json_response
from webapp.api.enqueue import IDEMPOTENCY_HEADER, idempotency_key, job_location, same_request
from webapp.api.errors import APIError
from webapp.api.schemas_operating import (
    PurgeQuery,
    PurgeRequest,
)
from webapp.api.state import job_store

#: Jobs one purge batch deletes (each batch is one short transaction or script).
PURGE_BATCH = 1000
#: Most batches one API purge runs, so a request has a bound; ``more`` says to run again.
PURGE_MAX_BATCHES = 100
#: The maintenance task name of retention runs (``store.maintenance_runs``).
RETENTION_TASK = RETENTION_LOCK
#: How long a purge request may hold the retention lock, seconds.
PURGE_LOCK_TTL_S = 120.0


# ------------------------------------------------------------------ delete
def delete_job(job_id: uuid.UUID) -> Response:
    """Delete a job that is not InProgress: the job, its events and keys go;
    the audit log keeps the deletion. 204; 409 while InProgress (cancel it first)."""
    job_store().delete(str(job_id), actor=current_token().actor)
    return Response(status=204)


# ------------------------------------------------------------------ queues
def queue_json(state: QueueState, counts: dict[str, int], latency_s: float = 0.0) -> dict[str, Any]:
    """A queue: its pause state, its jobs by status (all six) and its latency
    (seconds its oldest Queued job has waited)."""
    return {
        **state.to_json(),
        "counts": {s.name: counts.get(s.name, 0) for s in JobStatus},
        "latency_s": round(latency_s, 3),
    }


def queue_rows() -> list[dict[str, Any]]:
    """Every queue that has jobs or was ever paused, by name."""
    store = job_store()
    counts = store.counts()
    by_queue = counts.by_queue
    latency = queue_latency(store, counts)
    states = {q.name: q for q in store.queue_states()}
    names = sorted(set(by_queue) | set(states))
    return [
        queue_json(states.get(n) or QueueState(n, False), by_queue.get(n, {}), latency.get(n, 0.0))
        for n in names
    ]


def list_queues() -> dict[str, Any]:
    """Queues with jobs or a pause state: paused or not, who changed it and when, counts by status."""
    return {"items": queue_rows()}


def _set_paused(queue: str, paused: bool) -> dict[str, Any]:
    store = job_store()
    act = store.pause_queue if paused else store.resume_queue
    state = act(queue, actor=current_token().actor)
    counts = store.counts()
    return queue_json(state, counts.by_queue.get(queue, {}), queue_latency(store, counts).get(queue, 0.0))


def pause_queue(queue: str) -> dict[str, Any]:
    """Pause a queue: no job of it is claimed until it is resumed; running
    jobs finish and enqueue still works. Idempotent; audited."""
    return _set_paused(queue, True)


def resume_queue(queue: str) -> dict[str, Any]:
    """Resume a paused queue. Idempotent; audited."""
    return _set_paused(queue, False)


# ------------------------------------------------------------------- purge
def purge_plan(
    retention_s: dict[JobStatus, float], older_than_s: float | None, statuses: Sequence[str] | None
) -> list[tuple[JobStatus, float]]:
    """``(status, age in seconds)`` to purge: ``older_than_s`` for every chosen
    status, else each status's retention (0 keeps forever: skipped)."""
    chosen = [JobStatus[s] for s in statuses] if statuses else sorted(TERMINAL)
    if older_than_s is not None:
        return [(s, older_than_s) for s in chosen]
    return [(s, retention_s[s]) for s in chosen if retention_s.get(s, 0) > 0]


def run_purge() -> Response:
    """Delete finished jobs older than `older_than` seconds (query or body),
    of `status` (default Completed, Failed and Canceled); without `older_than`,
    each status after its own retention setting, under the retention lock
    (409 while a maintenance run holds it). `?dry_run=1` counts them:
    `{"would_prune": n}`; else `{"pruned": n}` in bounded batches (`more` when
    the request's bound was reached) and the run is recorded in the
    retention history with the token's actor as its owner, and in the audit log.
    The lock is this run's own (``store.maintenance.RunLock``: a second purge with
    the same token is refused, never shares it) and is extended after every batch."""
    q: PurgeQuery = context_of("query", PurgeQuery)
    body: PurgeRequest = context_of("json", PurgeRequest)
    older_than = body.older_than if body.older_than is not None else q.older_than
    statuses = body.status if body.status is not None else q.status
    settings = current_app.extensions["leasehold.settings"]
    plan = purge_plan(dict(settings.retention_s), older_than, statuses)
    store = job_store()
    if body.dry_run if body.dry_run is not None else q.dry_run:
        return json_response({"would_prune": sum(store.count_purgeable(age, [s]) for s, age in plan)})
    actor = current_token().actor
    try:
        lock = RunLock(store, RETENTION_LOCK, RETENTION_TASK, actor, PURGE_LOCK_TTL_S).acquire()
    except MaintenanceBusy as exc:
        raise APIError(409, f"a retention run is in progress ({exc.holder}); try again shortly") from None
    started, t0 = store.now(), time.perf_counter()
    pruned, batches, longest_ms, more = 0, 0, 0.0, False
    try:
        for status, age in plan:
            while True:
                if more or batches >= PURGE_MAX_BATCHES:
                    more = True
                    break
                if batches and not lock.extend():  # renewed before every batch after the first
                    more = True  # lost (expired, taken by another run): stop here
                    break
                b0 = time.perf_counter()
                n = store.purge(age, limit=PURGE_BATCH, statuses=[status])
                longest_ms = max(longest_ms, (time.perf_counter() - b0) * 1000)
                pruned, batches = pruned + n, batches + 1
                if n < PURGE_BATCH:
                    break
    finally:
        lock.release()
    duration_ms = (time.perf_counter() - t0) * 1000
    run = MaintenanceRun(
        str(uuid.uuid4()),
        RETENTION_TASK,
        ts(started),  # type: ignore[arg-type]
        ts(started + duration_ms / 1000),  # type: ignore[arg-type]
        actor,
        pruned,
        duration_ms,
        longest_ms,
    )
    store.record_maintenance_run(run)
    store.record_audit(EventKind.JOBS_PURGED, actor, purge_text(pruned, plan, more))
    return json_response({"pruned": pruned, "more": more})


def purge_text(pruned: int, plan: list[tuple[JobStatus, float]], more: bool) -> str:
    """The audit log's words for a purge: ``12 jobs purged (Completed older than 3600 s)``."""
    ages = ", ".join(f"{status.name} older than {age:g} s" for status, age in plan) or "nothing to purge"
    return f"{pruned:,} jobs purged ({ages})" + ("; more remain" if more else "")


# ---------------------------------------------------------------- periodic
def list_periodic() -> dict[str, Any]:
    """Stored schedules: cron in words, next run, enabled, last tick and its job's status."""
    return {"items": [v.to_json() for v in periodic.views(job_store())]}


def _toggle(name: str, enabled: bool) -> dict[str, Any]:
    store = job_store()
    schedule = periodic.set_enabled(store, name, enabled, current_token().actor)
    return periodic.view(store, schedule, store.now()).to_json()


def enable_periodic(name: str) -> dict[str, Any]:
    """Turn a schedule on (stored: survives restarts). 404 for an unknown name."""
    return _toggle(name, True)


def disable_periodic(name: str) -> dict[str, Any]:
    """Turn a schedule off: the scheduler enqueues nothing for it until enabled."""
    return _toggle(name, False)


def run_periodic(name: str) -> Response:
    """Enqueue the schedule's handler now with its queue and payload, outside
    its ticks (the schedule's last tick is unchanged). 202 with the job.
    `Idempotency-Key` as on `POST /api/jobs`: a replay answers 202 with the
    first job and enqueues nothing; the key used for another request is 422."""
    store = job_store()
    key = idempotency_key()
    spec = periodic.run_spec(store, name, key)
    job, created = periodic.run_now(store, name, spec, current_token().actor)
    if not created and key is not None and not same_request(job, spec, store.settings):
        raise APIError(
            422,
            f"{IDEMPOTENCY_HEADER} was already used for a different request (job {job.id})",
            IDEMPOTENCY_HEADER,
        )
    response = job_json(job, 202)
    response.headers["Location"] = job_location(job.id)
    return response
