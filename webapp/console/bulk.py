"""Bulk actions on the whole filter or on the rows an operator selected, and
an operation's page.

``POST /jobs/bulk`` acts on every job matching the job list's filters (all
but part of an id: status, queue, name, error, payload), or with ``ids`` (the
rows checked, at most ``store.bulk_select.MAX_SELECTED_IDS``) on those alone.
Without ``confirm`` it previews: how many jobs the action would change
(``store.bulk.preview_filter``). With ``confirm=1`` it records a
bulk operation for every job matching the filter (``store.bulk.start``, no
cap: a worker's maintenance thread runs it in batches) and redirects to
``/operations/<id>``, whose live fragment polls itself every second until the
operation is done or failed. A destructive action on more than
``operations.CONFIRM_ABOVE`` jobs needs the operator to type the count: the
server counts the jobs again at confirmation and checks the typed number
against that count (422 otherwise, with the form showing the current count);
the operation, and its audit entry, record the server's count, never the
form's.

The form carries an operation id made at preview, so a confirmation posted
twice starts one operation.
"""

from __future__ import annotations

import uuid
from typing import Any

from flask import Response, abort, current_app, make_response, redirect, request, url_for

from store import bulk as store_bulk
from store.errors import ValidationError
from store.models import BulkOperation
from webapp import operations
from webapp.console import auth, queries
from webapp.console.actions import actor
from webapp.console.blueprint import bp, is_htmx, render_template, render_view, store
from webapp.console.views import BULK_ACTIONS, BulkAction


def _panel(status: int = 200, **context: Any) -> Response:
    return render_view("bulk.html", "partials/bulk_panel.html", status=status, **context)


def _preview_context(action: BulkAction, where: dict[str, str], error: str | None = None) -> dict[str, Any]:
    selection = store_bulk.preview_filter(store(), action.key, where)
    return {
        "selection": selection,
        "type_count": operations.needs_typed_count(action.key, selection.eligible),
        "operation_id": str(uuid.uuid4()),
        "confirm_above": operations.CONFIRM_ABOVE,
        "error": error,
    }


def _filter_of(filters: queries.Filters, ids: list[str]) -> dict[str, str]:
    """The operation's filter (checked: ``store.bulk.check_filter``): the rows
    selected (``ids``) alone, or every list filter but part of an id. Raises
    ValidationError naming the field."""
    if ids:
        return store_bulk.check_filter({"ids": ids})
    keys = ("status", "queue", "name", "error", "payload")
    return store_bulk.check_filter({k: v for k, v in filters.as_query().items() if k in keys})


def _typed(raw: str | None) -> int | None:
    text = (raw or "").replace(",", "").replace("_", "").replace(" ", "").strip()
    return int(text) if text.isdigit() else None


@bp.post("/jobs/bulk")
@auth.operator_required
def bulk() -> Response:
    """First post: count preview and a confirmation form. Second post
    (``confirm=1``, ``operation_id``, and ``typed`` for a large destructive
    action): count again, start the operation and go to its page."""
    action = BULK_ACTIONS.get(request.form.get("action", ""))
    if action is None:
        abort(400, f"action must be one of {', '.join(BULK_ACTIONS)}.")
    filters, problems = queries.parse_filters(request.form)
    if problems:
        abort(400, " ".join(problems))
    ids = [i for i in request.form.getlist("ids") if i]
    context: dict[str, Any] = {
        "action": action,
        "filters": filters,
        "query": {} if ids else filters.as_query(),
        "ids": ids,
        "bulk_actions": BULK_ACTIONS,
    }
    if filters.id_part and not ids:
        # Said in the panel (200): a refusal status would log an error in the browser's console.
        refusal = "A bulk action does not take part of an id: select the rows instead, or clear the id field."
        return _panel(refused=refusal, **context)
    try:
        where = _filter_of(filters, ids)
    except ValidationError as exc:
        return _panel(refused=f"Nothing to act on: {exc}", **context)
    if request.form.get("confirm") != "1":
        return _panel(**context, **_preview_context(action, where))
    operation_id = request.form.get("operation_id", "")
    if not operations.OPERATION_ID.match(operation_id):
        abort(400, "The confirmation lacks its operation id. Preview again.")
    operation = store().get_operation(operation_id)  # a confirmation posted twice: the first one's
    if operation is None:
        # Counted again here: the form's own count (``expected``) is not trusted.
        count = store_bulk.preview_filter(store(), action.key, where).eligible
        if operations.needs_typed_count(action.key, count) and _typed(request.form.get("typed")) != count:
            message = (
                f"Type the number of jobs, {count:,}, to confirm this {action.key} "
                "(counted again now: the preview below shows the current count)."
            )
            return _panel(422, **context, **_preview_context(action, where, error=message))
        operation = store_bulk.start(store(), action.key, where, actor(), count, operation_id=operation_id)
    current_app.logger.info("bulk operation started by %s: %s", actor(), store_bulk.describe(operation))
    target = url_for("console.operation", operation_id=operation.id)
    if is_htmx():
        response = make_response("", 200)
        response.headers["HX-Redirect"] = target
        return response
    return redirect(target, 303)


# -------------------------------------------------------------- operation
#: The console's words for an operation's state.
STATES = {"queued": "waiting for a worker", "running": "running", "done": "done", "failed": "failed"}


def display_fraction(operation: BulkOperation) -> float:
    """The bar's fraction: 1.0 only when the operation is finished (the walk
    also visits jobs of other statuses when the filter names none, so
    changed + skipped can pass the count at preview before the end)."""
    if operation.finished:
        return 1.0
    return min(0.99, operation.progress)


def operation_context(operation_id: str) -> dict[str, Any]:
    """The operation's page; one no worker has picked up is run here for a
    moment first (``operations.advance``: the page polls itself every
    second, so it finishes without a worker)."""
    operation = store().get_operation(operation_id)
    if operation is None:
        abort(404, f"No bulk operation has id {operation_id}.")
    return operation_context_of(operations.advance(store(), operation))


def operation_context_of(operation: BulkOperation) -> dict[str, Any]:
    """What the templates show of one operation."""
    action = BULK_ACTIONS.get(operation.action)
    return {
        "op": operation,
        "action": action,
        "state_text": STATES.get(operation.state, operation.state),
        "fraction": display_fraction(operation),
        "who": operation.actor.removeprefix("operator:"),
        "jobs_query": dict(operation.filter),
    }


@bp.get("/operations/<operation_id>")
def operation(operation_id: str) -> Response:
    return render_view("operation.html", "partials/operation_live.html", **operation_context(operation_id))


#: Bulk operations the list page shows, newest first.
OPERATIONS_LISTED = 50


@bp.get("/operations")
def operation_list() -> Response:
    """Recent bulk operations, newest first, each linking to its page (the
    audit log interleaves them with every other operator action)."""
    rows = [operation_context_of(op) for op in store().operations(OPERATIONS_LISTED)]
    return make_response(render_template("operations.html", rows=rows, listed=OPERATIONS_LISTED))
