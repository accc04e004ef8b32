"""The job routes of the JSON API, on every store backend."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest
from flask.testing import FlaskClient

from store.base import JobStore
from store.lifecycle import JobStatus
from tests.web.conftest import OPERATOR, VIEWER


def enqueue(client: FlaskClient, **body: object) -> dict:
    response = client.post("/api/jobs", json={"name": "echo", **body}, headers=OPERATOR)
    assert response.status_code == 202, response.json
    return response.json


def error_of(response) -> dict:
    body = response.json
    assert set(body) == {"error"}, body
    assert body["error"]["code"] == response.status_code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


def test_enqueue_answers_202_with_the_job_and_its_location(api_client: FlaskClient, store: JobStore) -> None:
    response = api_client.post(
        "/api/jobs",
        json={
            "name": "index-source",
            "payload": {"path": "a.py"},
            "queue": "q1",
            "priority": 5,
            "max_retries": 1,
        },
        headers=OPERATOR,
    )
    assert response.status_code == 202
    job = response.json
    assert response.headers["Location"] == f"/api/jobs/{job['id']}"
    assert job["status"] == "Queued" and job["status_code"] == 100
    assert (job["name"], job["queue"], job["priority"], job["max_retries"]) == ("index-source", "q1", 5, 1)
    assert job["payload"] == {"path": "a.py"}
    assert job["created_at"].endswith("Z")
    assert store.get(job["id"]).payload == {"path": "a.py"}


def test_enqueue_with_a_delay_starts_scheduled(api_client: FlaskClient) -> None:
    job = enqueue(api_client, delay_s=60)
    assert job["status"] == "Scheduled"
    assert job["retry_delay_until"] is not None


def test_enqueue_at_a_time_and_with_an_expiry(api_client: FlaskClient, store: JobStore) -> None:
    """run_at (ISO 8601 with an offset, or epoch seconds) starts the job
    Scheduled until then by the store's clock; expires_in_s is answered as
    expires_at; a job past it is ended by the claim, Canceled Expired."""
    now = store.now()
    at = enqueue(api_client, run_at=now + 120)
    assert at["status"] == "Scheduled"
    assert abs(store.get(at["id"]).retry_delay_until.timestamp() - (now + 120)) < 1
    later = datetime.fromtimestamp(round(now) + 3600, timezone(timedelta(hours=2)))
    iso = enqueue(api_client, run_at=later.isoformat())
    due = store.get(iso["id"]).retry_delay_until.timestamp()
    assert round(now) + 3600 <= due < round(now) + 3600.05  # never earlier; later by the call's own time
    job = enqueue(api_client, expires_in_s=30, queue="expiring")
    assert job["expires_at"] is not None and job["expires_at"].endswith("Z")
    store.clock_offset_s += 31  # type: ignore[attr-defined]
    assert store.claim("w", ["expiring"], 1) == []
    got = api_client.get(f"/api/jobs/{job['id']}", headers=OPERATOR).json
    assert got["status"] == "Canceled" and got["error"]["type"] == "Expired"


def test_an_idempotency_key_replay_answers_202_with_the_first_job(
    api_client: FlaskClient, store: JobStore
) -> None:
    headers = {**OPERATOR, "Idempotency-Key": "order-42"}
    body = {"name": "echo", "payload": {"n": 1, "m": [1, 2]}, "max_retries": 3}
    first = api_client.post("/api/jobs", json=body, headers=headers)
    # the same request, keys in another order and the default written out
    again = api_client.post(
        "/api/jobs",
        json={"payload": {"m": [1, 2], "n": 1}, "name": "echo", "queue": "default"},
        headers=headers,
    )
    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json["id"] == first.json["id"]
    assert again.headers["Location"] == first.headers["Location"] == f"/api/jobs/{first.json['id']}"
    assert store.counts().by_status["Queued"] == 1


@pytest.mark.parametrize(
    "change",
    [
        {"payload": {"n": 2}},
        {"name": "other"},
        {"queue": "q2"},
        {"priority": 1},
        {"max_retries": 0},
        {"timeout_s": 5.0},
        {"lease_ttl_s": 3.0},
    ],
)
def test_an_idempotency_key_reused_for_a_different_request_is_422(
    api_client: FlaskClient, store: JobStore, change: dict
) -> None:
    headers = {**OPERATOR, "Idempotency-Key": "order-43"}
    body = {"name": "echo", "payload": {"n": 1}}
    assert api_client.post("/api/jobs", json=body, headers=headers).status_code == 202
    other = api_client.post("/api/jobs", json={**body, **change}, headers=headers)
    assert other.status_code == 422
    error = error_of(other)
    assert error["field"] == "Idempotency-Key" and "different request" in error["message"]
    assert sum(store.counts().by_status.values()) == 1


def test_a_held_unique_key_answers_200_and_an_idempotent_replay_keeps_it(api_client: FlaskClient) -> None:
    first = enqueue(api_client, unique_key="u-1")
    headers = {**OPERATOR, "Idempotency-Key": "k-u"}
    held = api_client.post("/api/jobs", json={"name": "echo", "unique_key": "u-1"}, headers=headers)
    replay = api_client.post("/api/jobs", json={"name": "echo", "unique_key": "u-1"}, headers=headers)
    assert (held.status_code, replay.status_code) == (200, 200)  # the original status, both times
    assert held.json["id"] == replay.json["id"] == first["id"]


@pytest.mark.parametrize("field", ["priority", "max_retries"])
def test_an_integral_json_number_is_an_integer(api_client: FlaskClient, field: str) -> None:
    job = enqueue(api_client, **{field: 5.0})
    assert job[field] == 5 and isinstance(job[field], int)
    for bad in (5.5, "5", True):
        refused = api_client.post("/api/jobs", json={"name": "echo", field: bad}, headers=OPERATOR)
        assert refused.status_code == 422, bad
        assert error_of(refused)["field"] == field


@pytest.mark.parametrize("payload", [None, True, "text", [1, 2], {"a": [1, {"b": None}]}, 7, 2.5])
def test_any_json_payload_round_trips(api_client: FlaskClient, handle, payload: object) -> None:
    job = enqueue(api_client, payload=payload)
    assert api_client.get(f"/api/jobs/{job['id']}", headers=VIEWER).json["payload"] == payload


def test_get_job_and_404(api_client: FlaskClient) -> None:
    job = enqueue(api_client)
    got = api_client.get(f"/api/jobs/{job['id']}", headers=VIEWER)
    assert got.status_code == 200
    assert got.json == {**job, "attempts": []}  # the single-job GET adds its attempts
    missing = api_client.get(f"/api/jobs/{uuid.uuid4()}", headers=VIEWER)
    assert missing.status_code == 404
    assert error_of(missing)["code"] == 404
    not_an_id = api_client.get("/api/jobs/not-a-job-id", headers=VIEWER)
    assert not_an_id.status_code == 404
    error_of(not_an_id)


def test_list_filters_and_pages(api_client: FlaskClient) -> None:
    ids = [enqueue(api_client, queue="a")["id"] for _ in range(5)]
    enqueue(api_client, queue="b", name="other")
    seen: list[str] = []
    cursor = None
    while True:
        query = "/api/jobs?queue=a&limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = api_client.get(query, headers=VIEWER)
        assert page.status_code == 200, page.json
        assert set(page.json) == {"items", "next_cursor", "prev_cursor"}
        assert len(page.json["items"]) <= 2
        seen += [item["id"] for item in page.json["items"]]
        cursor = page.json["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(ids)
    named = api_client.get("/api/jobs?name=other", headers=VIEWER).json["items"]
    assert [j["queue"] for j in named] == ["b"]
    by_status = api_client.get("/api/jobs?status=queued&limit=500", headers=VIEWER).json["items"]
    assert len(by_status) == 6
    by_code = api_client.get("/api/jobs?status=600", headers=VIEWER).json["items"]
    assert by_code == []


def test_cancel_requeue_retry_answer_the_job_or_409(api_client: FlaskClient, store: JobStore) -> None:
    job_id = enqueue(api_client)["id"]
    retry = api_client.post(f"/api/jobs/{job_id}/retry", headers=OPERATOR)
    assert retry.status_code == 409  # Queued cannot be retried
    assert "Queued" in error_of(retry)["message"]
    canceled = api_client.post(f"/api/jobs/{job_id}/cancel", headers=OPERATOR)
    assert canceled.status_code == 200
    assert canceled.json["status"] == "Canceled"
    assert api_client.post(f"/api/jobs/{job_id}/cancel", headers=OPERATOR).status_code == 409
    requeued = api_client.post(f"/api/jobs/{job_id}/requeue", headers=OPERATOR)
    assert requeued.status_code == 200
    assert requeued.json["status"] == "Queued"
    actors = {e.kind: e.actor for e in store.events(job_id)}
    assert actors["canceled"] == "operator:alice"
    assert actors["requeued"] == "operator:alice"


def test_retry_keeps_retries_and_requeue_can_keep_them(api_client: FlaskClient, store: JobStore) -> None:
    job_id = enqueue(api_client, max_retries=0)["id"]
    [claimed] = store.claim("w-1", ["default"])
    store.fail(
        job_id, claimed.lease_token, {"type": "E", "message": "boom", "traceback": None}, permanent=True
    )
    assert api_client.get(f"/api/jobs/{job_id}", headers=VIEWER).json["status"] == "Failed"
    retried = api_client.post(f"/api/jobs/{job_id}/retry", headers=OPERATOR)
    assert retried.status_code == 200 and retried.json["status"] == "Queued"
    [claimed] = store.claim("w-1", ["default"])
    store.fail(job_id, claimed.lease_token, {"type": "E", "message": "again", "traceback": None})
    kept = api_client.post(f"/api/jobs/{job_id}/requeue", json={"reset_retries": False}, headers=OPERATOR)
    assert kept.status_code == 200
    assert kept.json["status"] == "Queued"


def test_cancel_of_a_running_job_revokes_its_lease(api_client: FlaskClient, store: JobStore) -> None:
    job_id = enqueue(api_client)["id"]
    [claimed] = store.claim("w-1", ["default"])
    assert api_client.post(f"/api/jobs/{job_id}/cancel", headers=OPERATOR).status_code == 200
    from store.errors import LeaseLost

    with pytest.raises(LeaseLost):
        store.complete(job_id, claimed.lease_token, {"late": True})
    assert store.get(job_id).status is JobStatus.Canceled


@pytest.mark.parametrize("action", ["cancel", "requeue", "retry"])
def test_action_routes_are_post_only(api_client: FlaskClient, action: str) -> None:
    job_id = enqueue(api_client)["id"]
    response = api_client.get(f"/api/jobs/{job_id}/{action}", headers=OPERATOR)
    assert response.status_code == 405
    error_of(response)
    assert "POST" in response.headers["Allow"]
    assert api_client.get(f"/api/jobs/{job_id}", headers=VIEWER).json["status"] == "Queued"


@pytest.mark.parametrize("action", ["cancel", "requeue", "retry"])
def test_actions_on_an_unknown_job_are_404(api_client: FlaskClient, action: str) -> None:
    response = api_client.post(f"/api/jobs/{uuid.uuid4()}/{action}", headers=OPERATOR)
    assert response.status_code == 404
    error_of(response)


def test_events_are_the_timeline(api_client: FlaskClient) -> None:
    job_id = enqueue(api_client)["id"]
    api_client.post(f"/api/jobs/{job_id}/cancel", headers=OPERATOR)
    events = api_client.get(f"/api/jobs/{job_id}/events", headers=VIEWER)
    assert events.status_code == 200
    kinds = [e["kind"] for e in events.json["items"]]
    assert kinds == ["enqueued", "canceled"]
    assert events.json["items"][1]["actor"] == "operator:alice"
    assert events.json["items"][1]["from_status"] == "Queued"
    last = api_client.get(f"/api/jobs/{job_id}/events?limit=1", headers=VIEWER).json["items"]
    assert [e["kind"] for e in last] == ["canceled"]
    assert api_client.get(f"/api/jobs/{uuid.uuid4()}/events", headers=VIEWER).status_code == 404


def test_unknown_api_path_is_404_in_the_envelope(api_client: FlaskClient) -> None:
    response = api_client.get("/api/nothing-here", headers=VIEWER)
    assert response.status_code == 404
    error_of(response)
