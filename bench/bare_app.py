"""The bare Flask app that bench/api_enqueue.py measures Leasehold's API against.

    gunicorn -c gunicorn.conf.py bench.bare_app:app

What a minimal Flask app does to accept a job over HTTP, and nothing more:
for ``POST /api/jobs`` and for the async-endpoint route ``POST
/orders/<int:order_id>/invoice`` (the same rules as bench/api_app.py), it

* checks that an ``Authorization: Bearer …`` header is present (401 if not;
  the token itself is not compared with anything),
* parses the body with ``request.get_json()`` (Flask's default: the standard
  library's ``json``; 400/415 on a bad body, as Flask answers them),
* answers 202 with a job-shaped JSON body (every key of Leasehold's job JSON,
  a new uuid4 id, the time now) through Flask's default JSON provider, and a
  ``Location: /api/jobs/<id>`` header.

It stores nothing, validates no field, and has no hooks, no session use, no
schema and no metrics: the cost of Flask + gunicorn + the HTTP exchange for
this request, i.e. the ceiling Leasehold's ratio is taken against. It is
served by the same ``gunicorn.conf.py`` (worker class, processes, threads,
access log) so that only the app differs. ``GET /healthz`` answers 200 (the
bench waits for it, as for Leasehold).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from flask import Flask, abort, request

app = Flask(__name__)


def _job(name: str, payload: Any, queue: str, **request_parts: Any) -> dict[str, Any]:
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    return {
        "id": str(uuid.uuid4()),
        "name": name,
        "queue": queue,
        "status": "Queued",
        "status_code": 100,
        "priority": 0,
        "payload": payload,
        "headers": request_parts.get("headers"),
        "route_params": request_parts.get("route_params"),
        "query_params": request_parts.get("query_params"),
        "result": None,
        "error": None,
        "retry_count": 0,
        "max_retries": 3,
        "lease_expirations": 0,
        "retry_delay_until": None,
        "worker_id": None,
        "lease_token": 0,
        "lease_expires_at": None,
        "last_heartbeat_at": None,
        "timeout_seconds": 1800.0,
        "lease_ttl_seconds": None,
        "created_at": now,
        "started_at": None,
        "completed_at": None,
        "last_updated_at": now,
        "progress": None,
    }


def _accepted(job: dict[str, Any]) -> tuple[dict[str, Any], int, dict[str, str]]:
    return job, 202, {"Location": f"/api/jobs/{job['id']}"}


def _require_bearer() -> None:
    if not request.headers.get("Authorization", "").startswith("Bearer "):
        abort(401)


@app.post("/api/jobs")
def enqueue() -> tuple[dict[str, Any], int, dict[str, str]]:
    _require_bearer()
    body = request.get_json()
    if not isinstance(body, dict) or "name" not in body:
        abort(422)
    return _accepted(_job(body["name"], body.get("payload"), body.get("queue", "default")))


@app.post("/orders/<int:order_id>/invoice")
def invoice(order_id: int) -> tuple[dict[str, Any], int, dict[str, str]]:
    _require_bearer()
    body = request.get_json()
    return _accepted(_job("make-invoice", body, "billing", route_params={"order_id": order_id}))


@app.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}
