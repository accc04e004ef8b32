"""Console pages and actions of flow control: a queue's limits (shown with
their use on the queue page, set by an operator's form), a batch's page with
its live progress and jobs (cancel the whole batch), a job's parents and
children on the job page.

Actions are POSTs (CSRF-checked by the blueprint), operators only, made with
the store's actor ``operator:<name>`` so they reach the audit log.
"""

from __future__ import annotations

import uuid
from typing import Any

from flask import Response, abort, flash, redirect, request, url_for

from store.base import JobStore
from store.contract_flow import FlowUnsupported
from store.errors import JobNotFound
from store.flow_rules import LIMIT_KINDS, MAX_LIMIT, QueueLimits, Rate, parse_count_text, parse_rate_text
from store.models import Job
from webapp.console import auth
from webapp.console.blueprint import bp, is_htmx, render_view, store


def queue_limits_context(st: JobStore, queue: str) -> dict[str, Any]:
    """``limits`` (None on a store without flow control) and ``in_use`` by kind."""
    try:
        limits = st.queue_limits().get(queue, QueueLimits())
    except FlowUnsupported:
        return {"limits": None, "in_use": {}, "limit_kinds": LIMIT_KINDS, "max_limit": MAX_LIMIT}
    in_use = st.limit_usage(queue).in_use(limits) if limits.any else {}
    return {"limits": limits, "in_use": in_use, "limit_kinds": LIMIT_KINDS, "max_limit": MAX_LIMIT}


def rate_text(rate: Rate | None) -> str:
    return "" if rate is None else f"{rate.limit}/{rate.period_s:g}"


def form_limits() -> QueueLimits:
    """The limits an operator's form gives (an empty field clears that limit),
    by the one rule of ``store.flow_rules``. Raises ValidationError naming the field."""

    def count(name: str) -> int | None:
        raw = (request.form.get(name) or "").strip()
        return parse_count_text(name, raw) if raw else None

    def rate(name: str) -> Rate | None:
        raw = (request.form.get(name) or "").strip()
        return parse_rate_text(name, raw) if raw else None

    return QueueLimits(count("concurrency"), count("per_key_concurrency"), rate("rate"), rate("per_key_rate"))


def _actor() -> str:
    user = auth.current_user()
    assert user is not None  # operator_required ran
    return f"operator:{user.name}"


# ----------------------------------------------------------------- batches
def _batch_id(batch_id: str) -> str:
    try:
        return str(uuid.UUID(batch_id))
    except ValueError:
        abort(404, f"No batch has id {batch_id}.")


def batch_context(batch_id: str, message: str | None = None) -> dict[str, Any]:
    """What the batch page and its live fragment show."""
    st = store()
    try:
        batch = st.get_batch(_batch_id(batch_id))
    except (JobNotFound, FlowUnsupported):
        abort(404, f"No batch has id {batch_id}.")
    callback = st.get(batch.callback_job_id) if batch.callback_job_id else None
    done = sum(batch.counts.get(s, 0) for s in ("Completed", "Failed", "Canceled"))
    return {
        "batch": batch,
        "callback": callback,
        "jobs": st.batch_jobs(batch.id, 100),
        "done": done,
        "percent": round(100 * done / batch.size) if batch.size else 100,
        "live": not batch.finished or (callback is not None and callback.status.name not in _ENDED),
        "message": message,
    }


_ENDED = ("Completed", "Failed", "Canceled")


@bp.get("/batches/<batch_id>")
def batch_page(batch_id: str) -> Response:
    return render_view("batch.html", "partials/batch_live.html", **batch_context(batch_id))


@bp.post("/batches/<batch_id>/cancel")
@auth.operator_required
def cancel_batch(batch_id: str) -> Response:
    batch = store().cancel_batch(_batch_id(batch_id), actor=_actor())
    message = f"Batch canceled by {_actor().removeprefix('operator:')}."
    if is_htmx():
        return render_view("batch.html", "partials/batch_live.html", **batch_context(batch.id, message))
    flash(message)
    return redirect(url_for("console.batch_page", batch_id=batch.id), 303)


# -------------------------------------------------------------------- jobs
def limit_hold(st: JobStore, job: Job) -> tuple[str, str] | None:
    """The queue limit holding a Queued job, for "why isn't it running?"."""
    if job.status.name != "Queued":
        return None
    try:
        return st.limit_hold(job)
    except FlowUnsupported:
        return None


def job_dependencies(st: JobStore, job: Job) -> dict[str, Any]:
    """A job's parents and (the first 50 of) its children; empty without flow control."""
    try:
        parents = st.parents(job.id) if job.pending_parents is not None else []
        return {"parents": parents, "children": st.children(job.id, 50)}
    except FlowUnsupported:
        return {"parents": [], "children": []}
