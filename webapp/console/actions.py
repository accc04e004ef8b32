"""Console actions (POST, operators only, CSRF-checked by the blueprint).

Every action goes through the store with ``actor="operator:<name>"``, so it
lands in the job's timeline and in the audit log. An htmx request gets the
fragment it targets back (with the error in place and 409 when the job's
status does not allow the action); a plain form post is redirected back to
its page (post/redirect/get), or shown the page with the error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Response, abort, flash, make_response, redirect, request, url_for

from store.errors import InvalidTransition, JobNotFound
from store.lifecycle import Operation
from store.models import Job
from webapp.console import auth, recovery_pages
from webapp.console.blueprint import bp, is_htmx, render_view, store
from webapp.console.views import job_context, recovery_context

DONE = {
    Operation.CANCEL: "Canceled",
    Operation.REQUEUE: "Requeued",
    Operation.RETRY_NOW: "Queued for a retry now",
}


def actor() -> str:
    user = auth.current_user()
    assert user is not None  # operator_required ran
    return f"operator:{user.name}"


#: The store call behind each operator operation (``reset_retries`` only matters to requeue).
#: DELETE answers None: the job is gone.
_CALLS: dict[Operation, Callable[..., Job | None]] = {
    Operation.CANCEL: lambda st, job_id, actor, reset: st.cancel(job_id, actor=actor),
    Operation.REQUEUE: lambda st, job_id, actor, reset: st.requeue(job_id, actor=actor, reset_retries=reset),
    Operation.RETRY_NOW: lambda st, job_id, actor, reset: st.retry_now(job_id, actor=actor),
    Operation.DELETE: lambda st, job_id, actor, reset: st.delete(job_id, actor=actor),
}


def apply(op: Operation, job_id: str, *, reset_retries: bool = True) -> Job | None:
    """Run one operator operation on a job as the logged-in operator.
    Raises InvalidTransition, JobNotFound."""
    return _CALLS[op](store(), job_id, actor(), reset_retries)


def friendly(exc: InvalidTransition) -> str:
    verb = {
        "cancel": "canceled",
        "requeue": "requeued",
        "retry_now": "retried now",
        "delete": "deleted (cancel it first)",
    }.get(exc.operation or "", "changed")
    return f"This job is {exc.source} now and cannot be {verb}. The page shows its current state."


def _job_action(job_id: str, op: Operation, **options: Any) -> Response:
    try:
        apply(op, job_id, **options)
    except JobNotFound:
        abort(404, f"No job has id {job_id}.")
    except InvalidTransition as exc:
        return render_view(
            "job.html", "partials/job_live.html", status=409, **job_context(job_id, error=friendly(exc))
        )
    message = f"{DONE[op]} by {actor().removeprefix('operator:')}."
    if is_htmx():
        return render_view("job.html", "partials/job_live.html", **job_context(job_id, message=message))
    flash(message)
    return redirect(url_for("console.job", job_id=job_id), 303)


@bp.post("/jobs/<job_id>/cancel")
@auth.operator_required
def cancel(job_id: str) -> Response:
    return _job_action(job_id, Operation.CANCEL)


@bp.post("/jobs/<job_id>/requeue")
@auth.operator_required
def requeue(job_id: str) -> Response:
    mode = request.form.get("mode", "fresh")
    if mode not in ("fresh", "continue"):
        abort(400, "mode must be fresh (reset retries) or continue (keep them).")
    return _job_action(job_id, Operation.REQUEUE, reset_retries=mode == "fresh")


@bp.post("/jobs/<job_id>/retry")
@auth.operator_required
def retry(job_id: str) -> Response:
    return _job_action(job_id, Operation.RETRY_NOW)


@bp.post("/jobs/<job_id>/delete")
@auth.operator_required
def delete(job_id: str) -> Response:
    """Delete a job that is not InProgress; then go to the jobs of its queue."""
    try:
        queue = store().get(job_id).queue
        apply(Operation.DELETE, job_id)
    except JobNotFound:
        abort(404, f"No job has id {job_id}.")
    except InvalidTransition as exc:
        return render_view(
            "job.html", "partials/job_live.html", status=409, **job_context(job_id, error=friendly(exc))
        )
    flash(f"Deleted job {job_id} by {actor().removeprefix('operator:')}; the audit log keeps the deletion.")
    target = url_for("console.jobs", queue=queue)
    if is_htmx():
        response = make_response("", 200)
        response.headers["HX-Redirect"] = target
        return response
    return redirect(target, 303)


# -------------------------------------------------------------- recovery
@bp.post("/recovery/run")
@auth.operator_required
def recovery_run() -> Response:
    try:
        result = recovery_pages.run(store(), actor())
    except recovery_pages.LockHeld as exc:
        return render_view(
            "recovery.html", "partials/recovery_live.html", status=409, **recovery_context(error=str(exc))
        )
    if is_htmx():
        return render_view("recovery.html", "partials/recovery_live.html", **recovery_context(result=result))
    flash(f"Recovery run: {len(result.recovered)} retried, {len(result.failed)} failed.")
    return redirect(url_for("console.recovery"), 303)
