"""GET /api/jobs: paging back with ``before``, and search by id, error text
and payload field."""

from __future__ import annotations

from flask.testing import FlaskClient

from store.base import JobStore
from tests.web.conftest import OPERATOR, VIEWER


def _enqueue(client: FlaskClient, **body: object) -> str:
    response = client.post("/api/jobs", json={"name": "echo", **body}, headers=OPERATOR)
    assert response.status_code == 202, response.json
    return response.json["id"]


def test_pages_back_with_before(api_client: FlaskClient, store: JobStore) -> None:
    for _ in range(5):
        _enqueue(api_client)
        store.clock_offset_s += 1
    first = api_client.get("/api/jobs?limit=2", headers=VIEWER).json
    assert first["prev_cursor"] is None
    second = api_client.get(f"/api/jobs?limit=2&cursor={first['next_cursor']}", headers=VIEWER).json
    back = api_client.get(f"/api/jobs?limit=2&before={second['prev_cursor']}", headers=VIEWER).json
    assert [j["id"] for j in back["items"]] == [j["id"] for j in first["items"]]


def test_searches_by_id_error_and_payload(api_client: FlaskClient, store: JobStore) -> None:
    ann = _enqueue(api_client, payload={"user": "ann", "n": 3})
    bob = _enqueue(api_client, payload={"user": "bob"}, max_retries=0)
    [claimed] = [j for j in store.claim("w", ["default"], 10) if j.id == bob]
    store.fail(bob, claimed.lease_token, {"type": "OSError", "message": "Disk full", "traceback": None})
    by_payload = api_client.get("/api/jobs?payload=user=ann", headers=VIEWER)
    assert by_payload.status_code == 200, by_payload.json
    assert [j["id"] for j in by_payload.json["items"]] == [ann]
    assert by_payload.json["complete"] is True and by_payload.json["next_cursor"] is None
    by_error = api_client.get("/api/jobs?error=disk%20full", headers=VIEWER).json
    assert [j["id"] for j in by_error["items"]] == [bob]
    by_id = api_client.get(f"/api/jobs?id={ann[-8:]}&payload=n=3", headers=VIEWER).json
    assert [j["id"] for j in by_id["items"]] == [ann]
    assert api_client.get("/api/jobs?payload=novalue", headers=VIEWER).status_code in (400, 422)
    assert api_client.get("/api/jobs?id=xyz", headers=VIEWER).status_code in (400, 422)
