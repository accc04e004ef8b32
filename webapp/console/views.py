"""Console pages (GET): login, overview, jobs, job, workers, recovery, audit.

Each page that changes while it is open has a partial in
``templates/partials/`` that polls its own endpoint; see
``blueprint.render_view``.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from flask import Response, abort, current_app, make_response, redirect, request, url_for

from store.base import RECOVERY_LOCK
from store.errors import JobNotFound, ValidationError
from store.latency import queue_latency
from store.lifecycle import OPERATIONS, TERMINAL, EventKind, JobStatus, Operation
from store.models import JobEvent, ts
from webapp.console import auth, diagnosis, flow_pages, history, queries
from webapp.console.blueprint import bp, is_htmx, render_template, render_view, safe_next, settings, store
from webapp.console.recovery_pages import operator_name
from webapp.operations import OPERATION_IN_TEXT
from webapp.search_limit import SEARCH_WINDOW_S, search_wait

PAGE_SIZES = (25, 50, 100, 200)
RECENT_FAILURES = 8
AUDIT_LIMIT = 200
RECOVERY_HISTORY = 50
#: Maintenance task names (``store.maintenance_runs``).
RETENTION_TASK = "retention"
WORKERS_TASK = "workers"


# ----------------------------------------------------------------- login
@bp.route("/login", methods=["GET", "POST"])
def login() -> Any:
    target = safe_next(request.values.get("next"))
    if request.method == "GET":
        if auth.current_user() is not None:
            return redirect(target)
        return _login_form(target)
    name = (request.form.get("username") or "").strip()
    key = auth.client_key(name)
    wait = auth.throttle().retry_after(key)
    if wait > 0:
        response = _login_form(target, f"Too many failed attempts. Try again in {wait:.0f} s.", 429, name)
        response.headers["Retry-After"] = str(int(wait) + 1)
        return response
    user = auth.authenticate(name, request.form.get("password") or "")
    if user is None:
        auth.throttle().failed(key)
        return _login_form(target, "Unknown user or wrong password.", 401, name)
    auth.throttle().succeeded(key)
    auth.log_in(user)
    return redirect(target, 303)


def _login_form(target: str, error: str | None = None, status: int = 200, name: str = "") -> Response:
    html = render_template("login.html", next=target, error=error, username=name, no_users=not auth.users())
    return make_response(html, status)


@bp.post("/logout")
def logout() -> Any:
    auth.log_out()
    return redirect(url_for("console.login"), 303)


# -------------------------------------------------------------- overview
@bp.get("/")
def overview() -> Response:
    st = store()
    now_s = st.now()
    cfg = settings()
    counts = st.counts()
    workers = queries.worker_rows(st, now_s, cfg.lease_ttl_s)
    paused = queries.paused_queues(st)
    return render_view(
        "overview.html",
        "partials/overview_live.html",
        counts=counts,
        statuses=list(JobStatus),
        queues=sorted(set(counts.by_queue) | set(paused)),
        paused=paused,
        latency=queue_latency(st, counts),
        expired=st.expired_lease_count(),
        workers_alive=sum(1 for w in workers if w.alive and not w.overdue),
        workers_overdue=sum(1 for w in workers if w.alive and w.overdue),
        workers_total=len(workers),
        failures=st.list_jobs(status=JobStatus.Failed, limit=RECENT_FAILURES).items,
        history=history.read(st, now_s, request.args.get("range")),
        history_links=history.links("console.overview"),
        now=ts(now_s),
        now_s=now_s,
    )


# ------------------------------------------------------------------ jobs
def _page_size() -> int:
    try:
        size = int(request.args.get("limit", 50))
    except ValueError:
        size = 50
    return size if size in PAGE_SIZES else 50


def _exact_id(text: str | None) -> str | None:
    try:
        return str(uuid.UUID(text)) if text and len(text) == 36 else None
    except ValueError:
        return None


@bp.get("/jobs")
def jobs() -> Response:
    st = store()
    filters, problems = queries.parse_filters(request.args)
    exact = _exact_id(filters.id_part)
    if exact:
        try:
            st.get(exact)
        except JobNotFound:
            problems.append(f"No job has id {exact}.")
        else:
            target = url_for("console.job", job_id=exact)
            if is_htmx():
                response = make_response("", 200)
                response.headers["HX-Redirect"] = target
                return response
            return redirect(target, 303)
    status, wait = 200, 0
    if filters.searching:
        user = auth.current_user()
        limit = current_app.extensions["leasehold.web"].search_limit
        wait = search_wait(st, "console:" + (user.name if user else "?"), limit)
    try:
        args = request.args
        if wait:
            refusal = (
                f"Too many searches: at most {limit} every {SEARCH_WINDOW_S:g} s. Try again in {wait} s."
            )
            found, status = queries.Search([], None, [refusal]), 429
        else:
            found = queries.search(
                st, filters, _page_size(), args.get("cursor") or None, args.get("before") or None
            )
    except ValidationError as exc:
        problems.append(str(exc))
        found, status = queries.Search([], None), 400
    counts = st.counts()
    response = render_view(
        "jobs.html",
        "partials/jobs_table.html",
        status=status,
        found=found,
        notes=found.notes,
        problems=problems,
        filters=filters,
        query=filters.as_query(),
        limit=_page_size(),
        page_sizes=PAGE_SIZES,
        first_page=found.prev_cursor is None and not request.args.get("cursor"),
        statuses=list(JobStatus),
        queues=sorted(counts.by_queue),
        bulk_actions=BULK_ACTIONS,
        now_s=st.now(),
    )
    if wait:
        response.headers["Retry-After"] = str(wait)
    return response


@dataclass(frozen=True, slots=True)
class BulkAction:
    key: str
    label: str
    verb: str
    operation: Operation

    @property
    def statuses(self) -> frozenset[JobStatus]:
        return OPERATIONS[self.operation].sources


BULK_ACTIONS = {
    a.key: a
    for a in (
        BulkAction("cancel", "Cancel", "canceled", Operation.CANCEL),
        BulkAction("retry", "Retry now (keep retries)", "retried now", Operation.RETRY_NOW),
        BulkAction(
            "requeue", "Requeue fresh (reset retries)", "requeued with retries reset", Operation.REQUEUE
        ),
        BulkAction("delete", "Delete (job, events and keys)", "deleted", Operation.DELETE),
    )
}


# ------------------------------------------------------------------- job
def job_context(job_id: str, message: str | None = None, error: str | None = None) -> dict[str, Any]:
    """Everything the job page and its live fragment show."""
    st = store()
    cfg = settings()
    try:
        job = st.get(job_id)
    except JobNotFound:
        abort(404, f"No job has id {job_id}.")
    now_s = st.now()
    reasons: list[diagnosis.Reason] = []
    if job.status not in TERMINAL:
        ctx = diagnosis.Context(
            now_s=now_s,
            workers=st.workers(),
            lease_ttl_s=cfg.lease_ttl_s,
            recovery_interval_s=cfg.recovery_interval_s,
            queued_in_queue=queries.queued_in(st.counts(), job.queue)
            if job.status is not JobStatus.InProgress
            else 0,
            queue_state=queries.queue_state(st, job.queue),
            limit=flow_pages.limit_hold(st, job),
        )
        reasons = diagnosis.explain(job, ctx)
    return {
        "job": job,
        "events": st.events(job_id),
        "reasons": reasons,
        "terminal": job.status in TERMINAL,
        "can": {op.value: job.status in rule.sources for op, rule in OPERATIONS.items()},
        "lease_left": queries.since(job.lease_expires_at, now_s),
        "heartbeat_age": queries.since(job.last_heartbeat_at, now_s),
        "attempts": st.attempts(job_id),
        "progress_age": now_s - float(job.progress["at"]) if job.progress else None,
        "message": message,
        "error": error,
        "now_s": now_s,
        **flow_pages.job_dependencies(st, job),
    }


@bp.get("/jobs/<job_id>")
def job(job_id: str) -> Response:
    return render_view("job.html", "partials/job_live.html", **job_context(job_id))


# --------------------------------------------------------------- workers
def workers_context(message: str | None = None) -> dict[str, Any]:
    """What the workers page and its live fragment show."""
    st = store()
    now_s = st.now()
    return {
        "rows": queries.worker_rows(st, now_s, settings().lease_ttl_s),
        "alive_after_s": diagnosis.ALIVE_TTLS * settings().lease_ttl_s,
        "overdue_after_s": diagnosis.OVERDUE_TTLS * settings().lease_ttl_s,
        "forget_after_s": settings().worker_forget_after_s,
        "message": message,
        "now_s": now_s,
    }


@bp.get("/workers")
def workers() -> Response:
    return render_view("workers.html", "partials/workers_table.html", **workers_context())


# -------------------------------------------------------------- recovery
def recovery_context(result: Any = None, error: str | None = None) -> dict[str, Any]:
    st = store()
    cfg = settings()
    now_s = st.now()
    lock = st.lock_info(RECOVERY_LOCK)
    return {
        "preview": st.preview_recovery(cfg.recovery_batch),
        "expired": st.expired_lease_count(),
        "lock": lock,
        "lock_left": None if lock.expires_at is None else lock.expires_at.timestamp() - now_s,
        "runs": st.recovery_runs(RECOVERY_HISTORY),
        "result": result,
        "error": error,
        "interval_s": cfg.recovery_interval_s,
        "enabled": cfg.recovery_enabled,
        "retention": sorted(cfg.retention_s.items()),
        "forget_after_s": cfg.worker_forget_after_s,
        "maintenance_interval_s": cfg.maintenance_interval_s,
        "pruning": next(iter(st.maintenance_runs(RETENTION_TASK, limit=1)), None),
        "worker_pruning": next(iter(st.maintenance_runs(WORKERS_TASK, limit=1)), None),
        "now_s": now_s,
    }


@bp.get("/recovery")
def recovery() -> Response:
    return render_view("recovery.html", "partials/recovery_live.html", **recovery_context())


# ----------------------------------------------------------------- audit
@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One line of the audit log. ``job_id`` is None for actions on no job
    (queue pause/resume, recovery runs); ``queue`` names a paused or resumed
    queue; ``job_gone`` is True for a deletion (nothing to link to)."""

    at: datetime
    actor: str
    action: str
    job_id: str | None
    detail: str
    queue: str | None = None
    job_gone: bool = False
    operation: str | None = None
    #: A JSON document the detail carries (a queue's new limits), indented, shown on demand.
    document: str | None = None


_QUEUE_EVENTS = frozenset({EventKind.QUEUE_PAUSED, EventKind.QUEUE_RESUMED})
#: ``queue <name> limits <JSON>``: the message of QUEUE_LIMITS_SET (store/sql/flow.py, store/redis/flow.py).
_LIMITS_TEXT = re.compile(r"^queue (\S+) limits (\{.*\})$", re.DOTALL)


def _limits_change(e: JobEvent) -> tuple[str | None, str | None]:
    """The queue and the limits (indented JSON) of a QUEUE_LIMITS_SET entry; (None, None) otherwise."""
    found = _LIMITS_TEXT.match(e.message or "") if e.kind == EventKind.QUEUE_LIMITS_SET else None
    if found is None:
        return None, None
    try:
        document = orjson.dumps(orjson.loads(found.group(2)), option=orjson.OPT_INDENT_2).decode()
    except orjson.JSONDecodeError:
        document = found.group(2)
    return found.group(1), document


_BULK_EVENTS = frozenset({EventKind.BULK_STARTED, EventKind.BULK_FINISHED})


def _audit_entry(e: JobEvent) -> AuditEntry:
    change = " → ".join(s.name for s in (e.from_status, e.to_status) if s)
    detail = " · ".join(part for part in (change, e.message or "") if part)
    queue = (e.message or "").removeprefix("queue ") if e.kind in _QUEUE_EVENTS else None
    found = OPERATION_IN_TEXT.search(e.message or "") if e.kind in _BULK_EVENTS else None
    limits_queue, document = _limits_change(e)
    return AuditEntry(
        e.at,
        operator_name(e.actor or ""),
        e.kind,
        e.job_id or None,
        detail,
        queue=queue or limits_queue or None,
        job_gone=e.kind == EventKind.DELETED,
        operation=found.group(1) if found else None,
        document=document,
    )


def audit_entries(limit: int = AUDIT_LIMIT, cursor: str | None = None) -> tuple[list[AuditEntry], str | None]:
    """One page of operator actions, newest first: job events by
    ``operator:*`` actors (``store.audit_page``, ``limit`` a page, after
    ``cursor``), the first page merged with the recovery runs an operator
    triggered; and the cursor of the next (older) page, or None."""
    st = store()
    page = st.audit_page(limit, cursor)
    entries = [_audit_entry(e) for e in page.items]
    if cursor is None:
        for run in st.recovery_runs(RECOVERY_HISTORY):
            if run.trigger.startswith("operator:"):
                detail = (
                    f"{run.recovered} retried, {run.failed} failed, "
                    f"{run.duration_ms:.0f} ms (lock: {run.owner})"
                )
                entries.append(
                    AuditEntry(run.started_at, operator_name(run.trigger), "recovery run", None, detail)
                )
    entries.sort(key=lambda e: e.at, reverse=True)
    return entries, page.next_cursor


@bp.get("/audit")
def audit() -> Response:
    actor = (request.args.get("actor") or "").strip()
    try:
        entries, older = audit_entries(cursor=request.args.get("cursor") or None)
    except ValidationError:
        abort(400)
    if actor:
        entries = [e for e in entries if e.actor == actor]
    return render_view(
        "audit.html",
        "partials/audit_table.html",
        entries=entries,
        actor=actor,
        limit=AUDIT_LIMIT,
        older=older,
        paged=bool(request.args.get("cursor")),
    )
