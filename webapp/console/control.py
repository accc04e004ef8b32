"""Worker control from the workers page: quiet (stop claiming, finish what
it holds), unquiet (take a quiet back: claims resume) or stop (the graceful
SIGTERM path, after which the process exits and is not replaced).

The command is left in the registry (``store.command_worker``) and the
worker acts on it at its next registry heartbeat. The registry keeps who
sent it (``command_by``, shown on the page as "quiet (by ann)"); the audit
log has no event kind for workers, so the command is also logged with the
operator's name. POST only, operators only, CSRF-checked by the blueprint.
"""

from __future__ import annotations

from flask import Response, abort, current_app, flash, redirect, url_for

from store.errors import WorkerNotFound, WorkerStopping
from webapp.console import auth
from webapp.console.actions import actor
from webapp.console.blueprint import bp, is_htmx, render_view, store
from webapp.console.views import workers_context

#: What the page says a worker does after each command, at its next heartbeat.
SENT = {
    "quiet": "stops claiming and finishes the jobs it holds",
    "unquiet": "claims jobs again",
    "stop": (
        "stops claiming, finishes its jobs within its grace period, gives back the rest and exits; "
        "under a supervisor (worker --processes) that process is not replaced"
    ),
}


@bp.post("/workers/<worker_id>/<any(quiet, unquiet, stop):command>")
@auth.operator_required
def command_worker(worker_id: str, command: str) -> Response:
    try:
        store().command_worker(worker_id, command, actor=actor())
    except WorkerNotFound:
        abort(404, f"No worker is registered as {worker_id}.")
    except WorkerStopping:
        abort(409, f"Worker {worker_id} is stopping; a stop cannot be taken back.")
    current_app.logger.warning("worker %s: %s sent by %s", worker_id, command, actor())
    who = actor().removeprefix("operator:")
    message = f"Worker {worker_id}: {command} sent by {who}. At its next heartbeat it {SENT[command]}."
    if is_htmx():
        return render_view("workers.html", "partials/workers_table.html", **workers_context(message))
    flash(message)
    return redirect(url_for("console.workers"), 303)
