"""The enqueue routes' own request path (webapp.api.direct, encoding, bodies):
the same answers as through spectree's wrapper, byte for byte where Flask's
JSON encoding was used before, without a session, and a job body that still
matches its documented schema."""

from __future__ import annotations

import json
import uuid

import pytest
from flask import Flask
from flask.testing import FlaskClient

from store.base import JobStore
from tests.backends import StoreHandle
from tests.conftest import handle_fixture
from tests.web.conftest import OPERATOR, api_app_for
from tests.web.host_app import create_host_app
from webapp.api import async_endpoint
from webapp.api.encoding import encode
from webapp.api.schemas import ErrorResponse, JobOut

#: The request path does not depend on the store.
handle = handle_fixture(["sqlite"])

BODY = {"name": "index-source", "payload": {"path": "src/app/module.py", "lines": 120}}


@pytest.fixture
def orders_app(handle: StoreHandle) -> Flask:
    app = api_app_for(handle)
    async_endpoint(app, "/orders/<int:order_id>/invoice", "make-invoice", queue="billing")
    return app


def flask_bytes(app: Flask, value: object) -> bytes:
    """What Flask's default JSON provider sent for ``value`` (the API's encoding before orjson)."""
    with app.app_context():
        return app.json.response(value).get_data()


def test_enqueue_answers_are_flask_json_byte_for_byte(api_app: Flask, api_client: FlaskClient) -> None:
    response = api_client.post("/api/jobs", json=BODY, headers=OPERATOR)
    assert response.status_code == 202 and response.mimetype == "application/json"
    assert response.data == flask_bytes(api_app, response.json)
    JobOut.model_validate_json(response.data)
    for raw, code in ((b"{", 400), (b"{}", 422), (b'{"name": "x", "extra": 1}', 422)):
        error = api_client.post("/api/jobs", data=raw, content_type="application/json", headers=OPERATOR)
        assert error.status_code == code
        assert error.data == flask_bytes(api_app, error.json)
        ErrorResponse.model_validate_json(error.data)


def test_non_ascii_is_utf8_and_the_same_json_value(api_app: Flask, api_client: FlaskClient) -> None:
    payload = {"text": "grüße ✓ 𝄞", "keys": {"b": 1, "a": [1.5, None, True]}}
    response = api_client.post("/api/jobs", json={"name": "n", "payload": payload}, headers=OPERATOR)
    assert response.status_code == 202
    assert "grüße ✓ 𝄞".encode() in response.data
    assert json.loads(response.data) == json.loads(flask_bytes(api_app, response.json))
    assert response.json["payload"] == payload
    assert encode({"b": 1, "a": 2}) == b'{"a":2,"b":1}\n'


@pytest.mark.parametrize(
    ("raw", "field", "message"),
    [
        (b"", "name", "name: Field required"),
        (b"null", "name", "name: Field required"),
        (b"[]", "body", "body: must be a JSON object (or null)"),
        (b"[1]", "body", "body: must be a JSON object (or null)"),
        (b'{"name": "x", "colour": 1}', "colour", "colour: unknown field"),
        (b'{"name": "x", "priority": "5"}', "priority", "priority: Input should be a valid integer"),
        (b'{"name": "x", "priority": 5.5}', "priority", None),
        (b'{"name": "   "}', "name", None),
        (b'{"name": "x", "payload": {"a": [1, {"b": "\\u0000"}]}}', "payload.a[1].b", None),
    ],
)
def test_a_bad_body_is_422_naming_the_field(
    api_client: FlaskClient, store: JobStore, raw: bytes, field: str, message: str | None
) -> None:
    response = api_client.post("/api/jobs", data=raw, content_type="application/json", headers=OPERATOR)
    assert response.status_code == 422, response.data
    error = response.json["error"]
    assert (error["code"], error["field"]) == (422, field)
    if message is not None:
        assert error["message"] == message
    assert sum(store.counts().by_status.values()) == 0


def test_integral_float_is_still_an_integer(api_client: FlaskClient, store: JobStore) -> None:
    response = api_client.post("/api/jobs", json={"name": "x", "priority": 5.0}, headers=OPERATOR)
    assert response.status_code == 202
    assert store.get(response.json["id"]).priority == 5


def test_replays_and_unique_jobs_answer_the_documented_job(api_client: FlaskClient) -> None:
    headers = {**OPERATOR, "Idempotency-Key": "k-1"}
    first = api_client.post("/api/jobs", json=BODY, headers=headers)
    replay = api_client.post("/api/jobs", json=BODY, headers=headers)
    assert (first.status_code, replay.status_code) == (202, 202)
    assert replay.json["id"] == first.json["id"]
    assert replay.headers["Location"] == first.headers["Location"] == f"/api/jobs/{first.json['id']}"
    unique = {"name": "u", "unique_key": "one"}
    made = api_client.post("/api/jobs", json=unique, headers=OPERATOR)
    held = api_client.post("/api/jobs", json=unique, headers=OPERATOR)
    assert (made.status_code, held.status_code) == (202, 200)
    for response in (first, replay, made, held):
        JobOut.model_validate_json(response.data)


def test_api_requests_get_no_session_cookie(api_client: FlaskClient) -> None:
    response = api_client.post("/api/jobs", json=BODY, headers=OPERATOR)
    assert response.status_code == 202
    assert "Set-Cookie" not in response.headers
    assert "Cookie" not in response.headers.get("Vary", "")


def test_location_follows_the_script_root(api_client: FlaskClient) -> None:
    """``Location`` as ``url_for`` builds it, under each mount point (SCRIPT_NAME) in turn."""
    for root in ("", "/jobs-service", "/a%20b", "", "/jobs-service"):
        base = f"http://localhost{root}"
        response = api_client.post("/api/jobs", json=BODY, headers=OPERATOR, base_url=base)
        assert response.status_code == 202
        assert response.headers["Location"] == f"{root}/api/jobs/{response.json['id']}"


def test_location_under_an_extension_prefix(handle: StoreHandle) -> None:
    host = create_host_app(handle.store, STORE_URL=handle.url, LEASE_TTL=handle.store.settings.lease_ttl_s)
    token = {"Authorization": "Bearer host-op"}
    response = host.test_client().post("/ops/api/jobs", json=BODY, headers=token)
    assert response.status_code == 202, response.data
    assert response.headers["Location"] == f"/ops/api/jobs/{response.json['id']}"


def test_async_endpoint_answers_through_the_same_path(orders_app: Flask, store: JobStore) -> None:
    client = orders_app.test_client()
    response = client.post("/orders/7/invoice?x=1", json={"amount": 3}, headers=OPERATOR)
    assert response.status_code == 202
    JobOut.model_validate_json(response.data)
    assert response.data == flask_bytes(orders_app, response.json)
    job = store.get(response.json["id"])
    assert (job.payload, job.route_params, job.query_params) == ({"amount": 3}, {"order_id": 7}, {"x": "1"})
    assert response.headers["Location"] == f"/api/jobs/{job.id}"
    bad = client.post("/orders/7/invoice", data=b"{", content_type="application/json", headers=OPERATOR)
    assert bad.status_code == 400 and bad.json["error"]["message"].startswith("malformed JSON")
    assert client.post("/orders/7/invoice", json={}).status_code == 401


def test_openapi_still_documents_the_enqueue_routes(orders_app: Flask) -> None:
    doc = orders_app.test_client().get("/openapi.json", headers=OPERATOR).json
    post = doc["paths"]["/api/jobs"]["post"]
    assert post["operationId"] == "enqueue_job"
    body = post["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/EnqueueRequest"}
    assert {"202", "200", "400", "401", "403", "413", "415", "422"} <= set(post["responses"])
    invoice = doc["paths"]["/orders/{order_id}/invoice"]["post"]
    assert invoice["operationId"] == "async_make_invoice"
    assert "202" in invoice["responses"]


def test_a_job_id_is_a_uuid_in_location(api_client: FlaskClient) -> None:
    response = api_client.post("/api/jobs", json=BODY, headers=OPERATOR)
    uuid.UUID(response.headers["Location"].rsplit("/", 1)[1])
