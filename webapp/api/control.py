"""API views for control at scale: bulk operations on the whole
filter, run in the background (``POST /api/operations``), and worker
commands (``POST /api/workers/<id>/quiet``, ``/unquiet``, ``/stop``).

Registered by ``webapp.api.routes`` (its ROUTES table); authentication and
roles are the blueprint's (GET viewer, everything else operator). Actions
are made with the token's actor ``operator:<name>``.
"""

from __future__ import annotations

from typing import Any

from flask import Response, current_app, request, url_for

from store import bulk
from store.errors import WorkerNotFound, WorkerStopping
from store.models import BULK_ACTIONS, iso
from store.records import WorkerInfo
from webapp import operations
from webapp.api.auth import current_token
from webapp.api.common import context_of, json_response
from webapp.api.enqueue import IDEMPOTENCY_HEADER
from webapp.api.errors import APIError
from webapp.api.schemas_operating import (
    MAX_OPERATIONS_LISTED,
    ListOperationsQuery,
    OperationRequest,
)
from webapp.api.state import job_store


# ------------------------------------------------------------- operations
def operation_location(operation_id: str) -> str:
    return url_for("api.get_operation", operation_id=operation_id)


def _operation_key() -> str | None:
    """The request's Idempotency-Key, used as the operation's id. Raises
    APIError 422 naming the header when it is not a URL-safe id."""
    raw = request.headers.get(IDEMPOTENCY_HEADER)
    if raw is None:
        return None
    key = raw.strip()
    if not operations.OPERATION_ID.match(key):
        raise APIError(
            422, f"{IDEMPOTENCY_HEADER}: must be 1-100 characters of A-Z a-z 0-9 . _ ~ -", IDEMPOTENCY_HEADER
        )
    return key


def create_operation() -> Response:
    """Start a bulk action (`cancel`, `requeue`, `retry`, `delete`) on every
    job matching `filter`: 202 with the operation and `Location` at once; a
    worker's maintenance thread runs it in bounded batches. The jobs are
    counted now and the operation (and its audit entry) records that count;
    `expected`, the count the caller previewed, must equal it for a `cancel`
    or `delete` over 1,000 jobs (409 with the current count otherwise). With an
    `Idempotency-Key` (the operation's id) already used for the same action
    and filter, 200 with that operation; for another, 409. With no worker
    running, reading the operation (`GET /api/operations/<id>`) runs it."""
    body: OperationRequest = context_of("json", OperationRequest)
    if body.action not in BULK_ACTIONS:
        raise APIError(422, f"action: must be one of {', '.join(BULK_ACTIONS)}", "action")
    key = _operation_key()
    store = job_store()
    filter_ = bulk.check_filter(body.filter.model_dump(exclude_none=True))
    if key is not None:
        found = store.get_operation(key)
        if found is not None:
            if (found.action, found.filter) != (body.action, filter_):
                raise APIError(409, f"{IDEMPOTENCY_HEADER} was already used for a different operation")
            response = json_response(found.to_json(), 200)
            response.headers["Location"] = operation_location(found.id)
            return response
    count = bulk.preview_filter(store, body.action, filter_).eligible
    checked = body.expected is not None and operations.needs_typed_count(
        body.action, max(count, body.expected)
    )
    if checked and body.expected != count:
        raise APIError(
            409,
            f"the filter now matches {count:,} jobs the {body.action} applies to, not "
            f"{body.expected:,}; preview again and send the current count as expected",
            "expected",
        )
    operation = bulk.start(store, body.action, filter_, current_token().actor, count, operation_id=key)
    current_app.logger.info("bulk operation started by %s: %s", operation.actor, bulk.describe(operation))
    response = json_response(operation.to_json(), 202)
    response.headers["Location"] = operation_location(operation.id)
    return response


def get_operation(operation_id: str) -> dict[str, Any]:
    """A bulk operation: its filter, count at preview, state, changed and
    skipped jobs and progress (0.0 to 1.0; 1.0 once done). One no worker has
    advanced for a few seconds is run by this request for up to 2 s first
    (the same batches under the same lock), so polling it finishes it
    without a worker. 404 for an unknown id."""
    store = job_store()
    operation = store.get_operation(operation_id)
    if operation is None:
        raise APIError(404, f"no operation {operation_id!r}")
    return operations.advance(store, operation).to_json()


def list_operations() -> dict[str, Any]:
    """Bulk operations, newest first, `limit` a page; `next_cursor` (null on
    the last page) goes back as `?cursor=` for the next. Pages reach back
    MAX_OPERATIONS_LISTED operations."""
    q: ListOperationsQuery = context_of("query", ListOperationsQuery)
    offset = int(q.cursor or 0)
    found = job_store().operations(limit=min(offset + q.limit + 1, MAX_OPERATIONS_LISTED + 1))
    page = found[offset : offset + q.limit]
    more = len(found) > offset + q.limit and offset + q.limit < MAX_OPERATIONS_LISTED
    return {"items": [o.to_json() for o in page], "next_cursor": str(offset + q.limit) if more else None}


# ---------------------------------------------------------------- workers
def worker_json(w: WorkerInfo, now_s: float) -> dict[str, Any]:
    """A registry entry with the operator's command (``command``, ``command_by``)."""
    seen = None if w.last_seen_at is None else round(max(0.0, now_s - w.last_seen_at.timestamp()), 3)
    return {
        "id": w.id,
        "host": w.host,
        "pid": w.pid,
        "queues": list(w.queues),
        "concurrency": w.concurrency,
        "jobs_in_hand": list(w.jobs_in_hand),
        "started_at": iso(w.started_at),
        "last_seen_at": iso(w.last_seen_at),
        "seen_seconds_ago": seen,
        "command": w.command,
        "command_by": w.command_by,
    }


def _command(worker_id: str, command: str) -> dict[str, Any]:
    store = job_store()
    actor = current_token().actor
    try:
        info = store.command_worker(worker_id, command, actor=actor)
    except WorkerNotFound as exc:
        raise APIError(404, str(exc)) from None
    except WorkerStopping as exc:
        raise APIError(409, str(exc)) from None
    current_app.logger.warning("worker %s: %s sent by %s", worker_id, command, actor)
    return worker_json(info, store.now())


def quiet_worker(worker_id: str) -> dict[str, Any]:
    """Quiet a worker: at its next registry heartbeat it stops claiming and
    finishes the jobs it holds. The worker with its `command` and
    `command_by`; 404 for a worker not registered."""
    return _command(worker_id, "quiet")


def unquiet_worker(worker_id: str) -> dict[str, Any]:
    """Take a quiet back: at its next registry heartbeat the worker claims
    jobs again (no change for a worker that is not quiet). The worker with
    its `command` cleared; 404 for a worker not registered, 409 for one that
    was told to stop."""
    return _command(worker_id, "unquiet")


def stop_worker(worker_id: str) -> dict[str, Any]:
    """Stop a worker at its next registry heartbeat: the SIGTERM path (it
    finishes its jobs within its grace period, releases the rest) and then
    the process exits with code 5; a supervisor (`worker --processes`) does
    not replace it. 404 for a worker not registered."""
    return _command(worker_id, "stop")
