"""Console pages and actions for operating over months: a queue's page with
pause/resume and its limits form (``flow_pages.form_limits``), the Periodic page
(enable, disable, enqueue now), forgetting a silent worker.

Actions are POSTs (CSRF-checked by the blueprint), operators only, made with
the store's actor ``operator:<name>``, and each is one entry in the audit
log (queue pause/resume, schedule enable/disable/run, a forgotten worker).
An htmx request gets its page's live fragment back; a plain form post is
redirected (post/redirect/get).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from flask import Response, abort, current_app, flash, redirect, request, url_for

from store.errors import ScheduleNotFound, ValidationError
from store.flow_rules import LIMIT_KINDS
from store.latency import queue_latency
from store.lifecycle import EventKind, JobStatus
from store.models import QueueState
from store.spec import check_queue_name
from webapp import periodic
from webapp.console import auth, flow_pages, history, queries
from webapp.console.actions import actor
from webapp.console.blueprint import bp, is_htmx, render_view, safe_next, settings, store
from webapp.console.views import workers_context


def _who() -> str:
    return actor().removeprefix("operator:")


# ----------------------------------------------------------------- queues
def queue_context(queue: str, message: str | None = None) -> dict[str, Any]:
    """What the queue page and its live fragment show."""
    st = store()
    state = queries.queue_state(st, queue) or QueueState(queue, False)
    counts = st.counts()
    return {
        "queue": queue,
        "state": state,
        "changed_by": (state.changed_by or "").removeprefix("operator:"),
        "counts": counts.by_queue.get(queue, {}),
        "latency_s": queue_latency(st, counts).get(queue, 0.0),
        "statuses": list(JobStatus),
        "message": message,
        "history": history.read(st, st.now(), request.args.get("range"), queue),
        "history_links": history.links("console.queue", queue=queue),
        **flow_pages.queue_limits_context(st, queue),
        "rate_text": flow_pages.rate_text,
    }


@bp.get("/queues/<path:queue>")
def queue(queue: str) -> Response:
    return render_view("queue.html", "partials/queue_live.html", **queue_context(queue))


def _set_paused(queue: str, paused: bool) -> Response:
    st = store()
    (st.pause_queue if paused else st.resume_queue)(queue, actor=actor())
    message = f"Queue {queue} {'paused' if paused else 'resumed'} by {_who()}."
    if is_htmx():
        return render_view("queue.html", "partials/queue_live.html", **queue_context(queue, message))
    flash(message)
    return redirect(safe_next(request.form.get("next") or url_for("console.queue", queue=queue)), 303)


@bp.post("/queues/<path:queue>/pause")
@auth.operator_required
def pause_queue(queue: str) -> Response:
    return _set_paused(queue, True)


@bp.post("/queues/<path:queue>/resume")
@auth.operator_required
def resume_queue(queue: str) -> Response:
    return _set_paused(queue, False)


@bp.post("/queues/<path:queue>/limits")
@auth.operator_required
def set_queue_limits(queue: str) -> Response:
    """Set a queue's limits from the form; back to the queue page (htmx: a
    full reload of it, ``HX-Redirect``). A bad value answers 422 with the
    form again, the field named and what was typed kept (htmx: the form alone)."""
    who = actor()
    try:
        check_queue_name(queue)
        limits = store().set_queue_limits(queue, flow_pages.form_limits(), actor=who)
    except ValidationError as exc:
        return _form_error(queue, exc)
    done = "set" if limits.any else "cleared"
    flash(f"Limits of {queue} {done} by {who.removeprefix('operator:')}.")
    target = url_for("console.queue", queue=queue)
    if is_htmx():
        return Response(status=204, headers={"HX-Redirect": target})
    return redirect(target, 303)


def _form_error(queue: str, exc: ValidationError) -> Response:
    if exc.field == "queue":  # no page to show the form on
        abort(422, f"Limits not changed: {exc}")
    typed = {k: (request.form.get(k) or "")[:100] for k in LIMIT_KINDS}
    context = {**queue_context(queue), "limits_error": f"Limits not changed: {exc}", "typed": typed}
    return render_view("queue.html", "partials/queue_limits_form.html", 422, **context)


# --------------------------------------------------------------- periodic
def periodic_context(message: str | None = None) -> dict[str, Any]:
    """The schedules, and ``nonce()``: a fresh key for each "Enqueue now"
    form, sent back as its idempotency key (a double click makes one job)."""
    return {"schedules": periodic.views(store()), "message": message, "nonce": lambda: uuid.uuid4().hex}


@bp.get("/periodic")
def periodic_page() -> Response:
    return render_view("periodic.html", "partials/periodic_table.html", **periodic_context())


def _periodic_done(message: str) -> Response:
    if is_htmx():
        return render_view("periodic.html", "partials/periodic_table.html", **periodic_context(message))
    flash(message)
    return redirect(url_for("console.periodic_page"), 303)


@bp.post("/periodic/<path:name>/<any(enable, disable):action>")
@auth.operator_required
def periodic_toggle(name: str, action: str) -> Response:
    try:
        periodic.set_enabled(store(), name, action == "enable", actor())
    except ScheduleNotFound:
        abort(404, f"No schedule is called {name}.")
    current_app.logger.info("schedule %s %sd by %s", name, action, actor())
    return _periodic_done(f"Schedule {name} {action}d by {_who()}.")


#: An "Enqueue now" form's nonce (``periodic_context``).
_NONCE = re.compile(r"^[0-9a-f]{32}$")


@bp.post("/periodic/<path:name>/run")
@auth.operator_required
def periodic_run(name: str) -> Response:
    """Enqueue the schedule's job now; the form's nonce is the idempotency
    key, so the same form posted twice enqueues one job."""
    nonce = request.form.get("nonce", "")
    if not _NONCE.match(nonce):
        abort(400, "The form lacks its nonce. Reload the page and try again.")
    try:
        spec = periodic.run_spec(store(), name, f"console-periodic-run:{nonce}")
        job, created = periodic.run_now(store(), name, spec, actor())
    except ScheduleNotFound:
        abort(404, f"No schedule is called {name}.")
    if created:
        current_app.logger.info("schedule %s enqueued now by %s: job %s", name, actor(), job.id)
        return _periodic_done(f"Enqueued {job.name} now ({job.id}) by {_who()}.")
    return _periodic_done(f"Already enqueued by this form: {job.name} ({job.id}).")


# ---------------------------------------------------------------- workers
@bp.post("/workers/<worker_id>/forget")
@auth.operator_required
def forget_worker(worker_id: str) -> Response:
    """Remove a silent worker from the registry; a live one is refused (409)."""
    st = store()
    now_s = st.now()
    row = next(
        (r for r in queries.worker_rows(st, now_s, settings().lease_ttl_s) if r.info.id == worker_id), None
    )
    if row is None:
        abort(404, f"No worker is registered as {worker_id}.")
    if row.alive:
        abort(409, f"Worker {worker_id} is alive (it heartbeated {row.age_s or 0:.0f} s ago); stop it first.")
    st.remove_worker(worker_id)
    detail = f"worker {worker_id} (last heartbeat {row.age_s or 0:.0f} s ago)"
    st.record_audit(EventKind.WORKER_FORGOTTEN, actor(), detail)
    current_app.logger.warning("%s forgotten by %s", detail, actor())
    message = f"Worker {worker_id} forgotten by {_who()}."
    if is_htmx():
        return render_view("workers.html", "partials/workers_table.html", **workers_context(message))
    flash(message)
    return redirect(url_for("console.workers"), 303)
