"""API routes of control at scale: bulk operations, attempts in
the job JSON, worker commands."""

from __future__ import annotations

from flask.testing import FlaskClient

from store import bulk
from store.base import JobStore
from store.lifecycle import EventKind, JobStatus
from store.records import WorkerInfo
from tests.store.helpers import job_in
from tests.web.conftest import OPERATOR, VIEWER

S = JobStatus
MISSING = "0190c0de-0000-7000-8000-000000000000"


# -------------------------------------------------------------- operations
def test_operation_is_202_with_location_and_runs_in_the_background(
    api_client: FlaskClient, store: JobStore
) -> None:
    failed = [job_in(store, S.Failed, queue="mail").id for _ in range(3)]
    other = job_in(store, S.Failed, queue="other").id
    body = {"action": "retry", "filter": {"status": "Failed", "queue": "mail"}}
    response = api_client.post("/api/operations", json=body, headers=OPERATOR)
    assert response.status_code == 202, response.json
    op = response.json
    assert response.headers["Location"] == f"/api/operations/{op['id']}"
    assert (op["state"], op["expected"], op["actor"]) == ("queued", 3, "operator:alice")
    assert op["filter"] == {"status": "Failed", "queue": "mail"}
    assert all(store.get(i).status is S.Failed for i in failed)  # nothing done in the request

    assert bulk.run_pending(store, "test") >= 1
    done = api_client.get(response.headers["Location"], headers=VIEWER)
    assert done.status_code == 200
    assert (done.json["state"], done.json["changed"], done.json["progress"]) == ("done", 3, 1.0)
    assert all(store.get(i).status is S.Queued for i in failed)
    assert store.get(other).status is S.Failed
    bulk_kinds = (EventKind.BULK_FINISHED, EventKind.BULK_STARTED)
    entries = [e for e in store.audit() if e.kind in bulk_kinds]
    assert [e.kind for e in entries] == list(bulk_kinds) and op["id"] in entries[0].message
    assert entries[0].job_id in (None, "") and entries[0].actor == "operator:alice"


def test_operation_records_the_servers_count(api_client: FlaskClient, store: JobStore) -> None:
    store.enqueue("t")
    body = {"action": "cancel", "filter": {"name": "t"}, "expected": 7}
    assert api_client.post("/api/operations", json=body, headers=OPERATOR).json["expected"] == 1
    body = {"action": "cancel", "filter": {"name": "t"}}
    assert api_client.post("/api/operations", json=body, headers=OPERATOR).json["expected"] == 1


def test_operation_idempotency_key_is_its_id(api_client: FlaskClient, store: JobStore) -> None:
    store.enqueue("t")
    body = {"action": "cancel", "filter": {"status": "Queued"}}
    key = {**OPERATOR, "Idempotency-Key": "nightly-cancel.1"}
    first = api_client.post("/api/operations", json=body, headers=key)
    assert (first.status_code, first.json["id"]) == (202, "nightly-cancel.1")
    again = api_client.post("/api/operations", json=body, headers=key)
    assert again.status_code == 200 and again.json["id"] == "nightly-cancel.1"
    assert len(store.operations()) == 1
    other = api_client.post("/api/operations", json={"action": "delete"}, headers=key)
    assert other.status_code == 409 and other.json["error"]["code"] == 409
    bad = api_client.post("/api/operations", json=body, headers={**OPERATOR, "Idempotency-Key": "a b/c"})
    assert bad.status_code == 422 and bad.json["error"]["field"] == "Idempotency-Key"


def test_operation_validation_auth_and_unknown(api_client: FlaskClient, store: JobStore) -> None:
    post = api_client.post
    assert post("/api/operations", json={"action": "explode"}, headers=OPERATOR).status_code == 422
    bad_status = post(
        "/api/operations", json={"action": "cancel", "filter": {"status": "Lost"}}, headers=OPERATOR
    )
    assert bad_status.status_code == 422 and bad_status.json["error"]["field"] == "status"
    unknown = post("/api/operations", json={"action": "cancel", "filter": {"payload": "x"}}, headers=OPERATOR)
    assert unknown.status_code == 422
    negative = post("/api/operations", json={"action": "cancel", "expected": -1}, headers=OPERATOR)
    assert negative.status_code == 422
    assert post("/api/operations", json={"action": "cancel"}, headers=VIEWER).status_code == 403
    assert post("/api/operations", json={"action": "cancel"}).status_code == 401
    assert store.operations() == []
    missing = api_client.get("/api/operations/nope", headers=VIEWER)
    assert missing.status_code == 404 and missing.json["error"]["code"] == 404
    assert api_client.get("/api/operations/nope").status_code == 401


# ---------------------------------------------------------------- attempts
def test_single_job_has_its_attempts_and_lists_do_not(api_client: FlaskClient, store: JobStore) -> None:
    job = store.enqueue("t", {}, max_retries=3)
    [claimed] = store.claim("w-1", ["default"])
    error = {"type": "ValueError", "message": "first <cause>", "traceback": "Traceback ...\nValueError"}
    store.fail(job.id, claimed.lease_token, error, worker_id="w-1")
    got = api_client.get(f"/api/jobs/{job.id}", headers=VIEWER).json
    [attempt] = got["attempts"]
    assert (attempt["attempt"], attempt["token"], attempt["worker_id"]) == (1, claimed.lease_token, "w-1")
    assert attempt["error"]["message"] == "first <cause>" and attempt["finished_at"].endswith("Z")
    assert "progress" in got
    listed = api_client.get("/api/jobs", headers=VIEWER).json["items"]
    assert "attempts" not in listed[0]
    fresh = store.enqueue("t")
    assert api_client.get(f"/api/jobs/{fresh.id}", headers=VIEWER).json["attempts"] == []


# ----------------------------------------------------------------- workers
def _register(store: JobStore, worker_id: str = "w-ctl") -> None:
    store.worker_heartbeat(WorkerInfo(worker_id, "host", 4242, ["default"], 2))


def test_quiet_and_stop_a_worker(api_client: FlaskClient, store: JobStore) -> None:
    _register(store)
    quiet = api_client.post("/api/workers/w-ctl/quiet", headers=OPERATOR)
    assert quiet.status_code == 200, quiet.json
    assert (quiet.json["id"], quiet.json["command"], quiet.json["command_by"]) == (
        "w-ctl",
        "quiet",
        "operator:alice",
    )
    assert store.worker_heartbeat(WorkerInfo("w-ctl", "host", 4242, ["default"], 2)) == "quiet"
    stop = api_client.post("/api/workers/w-ctl/stop", headers=OPERATOR)
    assert (stop.status_code, stop.json["command"]) == (200, "stop")


def test_unquiet_a_worker(api_client: FlaskClient, store: JobStore) -> None:
    _register(store)
    api_client.post("/api/workers/w-ctl/quiet", headers=OPERATOR)
    assert api_client.post("/api/workers/w-ctl/unquiet", headers=VIEWER).status_code == 403
    back = api_client.post("/api/workers/w-ctl/unquiet", headers=OPERATOR)
    assert back.status_code == 200, back.json
    assert (back.json["id"], back.json["command"], back.json["command_by"]) == ("w-ctl", None, None)
    assert store.worker_heartbeat(WorkerInfo("w-ctl", "host", 4242, ["default"], 2)) is None
    assert store.audit(1)[0].message == "unquiet worker w-ctl"
    assert api_client.post("/api/workers/w-ctl/stop", headers=OPERATOR).status_code == 200
    refused = api_client.post("/api/workers/w-ctl/unquiet", headers=OPERATOR)
    assert refused.status_code == 409 and "stopping" in refused.json["error"]["message"]
    assert store.workers()[0].command == "stop"
    assert api_client.post("/api/workers/nobody/unquiet", headers=OPERATOR).status_code == 404
    assert "/api/workers/{worker_id}/unquiet" in api_client.get("/openapi.json", headers=VIEWER).json["paths"]


def test_worker_commands_auth_and_unknown(api_client: FlaskClient, store: JobStore) -> None:
    _register(store)
    assert api_client.post("/api/workers/w-ctl/quiet", headers=VIEWER).status_code == 403
    assert api_client.post("/api/workers/w-ctl/stop").status_code == 401
    missing = api_client.post("/api/workers/nobody/stop", headers=OPERATOR)
    assert missing.status_code == 404 and missing.json["error"]["code"] == 404
    assert api_client.get("/api/workers/w-ctl/quiet", headers=OPERATOR).status_code == 405
    [info] = store.workers()
    assert info.command is None
