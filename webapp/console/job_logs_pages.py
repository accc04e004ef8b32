"""The job page's log panel (templates/partials/job_logs.html): the lines
the job's handler logged with ``ctx.log`` (store/job_logs.py), fetched by
htmx once the page is shown and again every 2 s while the job runs (the
fragment stops polling once the job is finished)."""

from __future__ import annotations

from flask import Response, abort

from store.errors import JobNotFound
from store.job_logs import read_logs
from store.lifecycle import TERMINAL
from webapp.console.blueprint import bp, render_template, store

#: Lines the panel shows at most (the oldest first; the API and the command read them all).
PANEL_LINES = 500


@bp.get("/jobs/<job_id>/logs")
def job_logs_panel(job_id: str) -> Response:
    st = store()
    try:
        job = st.get(job_id)
        lines, _ = read_logs(st, job_id, limit=PANEL_LINES)
    except JobNotFound:
        abort(404, "No job has that id.")
    html = render_template(
        "partials/job_logs.html", job=job, log_lines=lines, terminal=job.status in TERMINAL
    )
    response = Response(html)
    response.vary.add("HX-Request")
    return response
