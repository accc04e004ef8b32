"""``/jobs/new``: an operator enqueues a job from the console (Oban Web's job
form, Hangfire's "Trigger now").

The handler is picked from the catalogue the live workers publish
(``store.catalogue``); its defaults (queue, max retries, timeout) fill the
form (``static/console.js`` refills them when another handler is picked).
The payload is JSON, checked in the browser before it is sent and again here:
a bad field re-renders the form with 422 and the field named, nothing
enqueued. The form's nonce is the job's idempotency key, so a form posted
twice enqueues one job. CSRF is the blueprint's, as for every console POST.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson
from flask import Response, current_app, flash, make_response, redirect, request, url_for

from store.catalogue import Catalogue, HandlerEntry, catalogue
from store.errors import ValidationError
from store.models import JobSpec
from webapp.console import auth
from webapp.console.actions import actor
from webapp.console.blueprint import bp, render_template, store

#: Idempotency keys of console-made jobs: ``console:<nonce>``.
KEY_PREFIX = "console:"


def _form(entries: dict[str, HandlerEntry], values: dict[str, str], problem: tuple[str, str] | None) -> str:
    return render_template(
        "job_new.html",
        handlers=list(entries.values()),
        values=values,
        problem=problem,
        nonce=values.get("nonce") or uuid.uuid4().hex,
    )


def _number(values: dict[str, str], name: str, kind: type) -> Any:
    raw = (values.get(name) or "").strip()
    if not raw:
        return None
    try:
        value = kind(raw)
    except ValueError:
        raise ValidationError(name, f"must be a {'whole ' if kind is int else ''}number, or empty") from None
    if value < 0:
        raise ValidationError(name, "must be 0 or more")
    return value


def _spec(values: dict[str, str]) -> tuple[JobSpec, set[str]]:
    """The job the form asks for and the options it set. Raises
    ValidationError naming the field (name, payload, queue, max_retries, timeout_s, delay_s)."""
    name = (values.get("name") or "").strip()
    if not name:
        raise ValidationError("name", "pick a handler or type a job name")
    try:
        payload = orjson.loads(values.get("payload") or "null")
    except orjson.JSONDecodeError as exc:
        raise ValidationError("payload", f"is not JSON: {exc}") from None
    given = {"name", "payload"}
    options: dict[str, Any] = {}
    if (values.get("queue") or "").strip():
        options["queue"] = values["queue"].strip()
    for field, kind in (("max_retries", int), ("timeout_s", float), ("delay_s", float)):
        value = _number(values, field, kind)
        if value is not None:
            options[field] = value
    given |= set(options)
    nonce = values.get("nonce") or ""
    spec = JobSpec(name, payload, idempotency_key=KEY_PREFIX + nonce if nonce else None, **options)
    return spec, given


@bp.get("/jobs/new")
@auth.operator_required
def new_job() -> Response:
    entries = catalogue(store())
    values = {"name": request.args.get("name", ""), "payload": "{}"}
    return make_response(_form(entries, values, None))


@bp.post("/jobs/new")
@auth.operator_required
def create_job() -> Response:
    values = {
        k: request.form.get(k, "")
        for k in ("name", "payload", "queue", "max_retries", "timeout_s", "delay_s", "nonce")
    }
    entries = catalogue(store())
    try:
        spec, given = _spec(values)
        spec = Catalogue(store()).with_defaults(spec, given)
        job, created = store().enqueue_idempotent(spec)
    except ValidationError as exc:
        return make_response(_form(entries, values, (exc.field, str(exc))), 422)
    who = actor()
    current_app.logger.info("job %s (%s) enqueued from the console by %s", job.id, job.name, who)
    flash(f"Enqueued by {who.removeprefix('operator:')}." if created else "Already enqueued by this form.")
    return redirect(url_for("console.job", job_id=job.id), 303)
