"""``/openapi.json`` walked as a client generator would read it: every
operation named, every answer the API can give documented with its schema,
times as ``date-time``, statuses as an enum, the headers of enqueueing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask

from store.lifecycle import JobStatus
from tests.backends import StoreHandle
from tests.web.conftest import OPERATOR, VIEWER, api_app_for
from webapp.api import async_endpoint

METHODS = ("get", "post", "put", "patch", "delete")
#: Errors the blueprint's hooks answer before any view runs.
AUTH_ERRORS = {"401", "422"}
BODY_ERRORS = {"400", "403", "413", "415"}
#: Names of time fields.
TIME_SUFFIXES = ("_at", "_until")


@pytest.fixture
def doc(handle: StoreHandle) -> dict[str, Any]:
    app = api_app_for(handle)
    async_endpoint(app, "/orders/<int:order_id>/invoice", "make-invoice")
    return app.test_client().get("/openapi.json", headers=VIEWER).json


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return doc["components"]["schemas"][ref.rsplit("/", 1)[1]] if ref else schema


def time_fields(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for model, schema in doc["components"]["schemas"].items():
        for name, prop in schema.get("properties", {}).items():
            if name == "at" or name.endswith(TIME_SUFFIXES):
                yield model, name, prop


def test_every_operation_has_a_unique_operation_id(doc: dict[str, Any]) -> None:
    ids = [op.get("operationId") for _, _, op in operations(doc)]
    assert all(ids) and len(ids) == len(set(ids)), ids
    by_route = {(path, method): op["operationId"] for path, method, op in operations(doc)}
    assert by_route["/api/jobs", "post"] == "enqueue_job"
    assert by_route["/api/jobs/{job_id}", "get"] == "get_job"
    assert by_route["/orders/{order_id}/invoice", "post"] == "async_make_invoice"


def test_every_answer_is_documented_with_its_schema(doc: dict[str, Any]) -> None:
    for path, method, op in operations(doc):
        responses = op["responses"]
        codes = set(responses)
        anonymous = op.get("security") == []
        if not anonymous:
            assert codes >= AUTH_ERRORS, (path, method, codes)
        if method != "get":
            assert codes >= BODY_ERRORS, (path, method, codes)
        for code, response in responses.items():
            if code == "204":
                assert "content" not in response
                continue
            assert response.get("content"), (path, method, code)
            schema = next(iter(response["content"].values()))["schema"]
            if int(code) >= 400 and not anonymous:
                assert schema == {"$ref": "#/components/schemas/ErrorResponse"}, (path, method, code)
            if code == "401":
                assert "WWW-Authenticate" in response["headers"]


def test_time_fields_are_date_time(doc: dict[str, Any]) -> None:
    found = {(model, name) for model, name, _ in time_fields(doc)}
    assert {("JobOut", "created_at"), ("JobOut", "retry_delay_until"), ("EventOut", "at")} <= found
    assert {("WorkerOut", "last_seen_at"), ("ProgressOut", "at"), ("ScheduleOut", "next_run_at")} <= found
    for model, name, prop in time_fields(doc):
        variants = [w for v in prop.get("anyOf", [prop]) for w in v.get("oneOf", [v])]  # a time or epoch s
        strings = [v for v in variants if v.get("type") == "string"]
        assert strings and all(v.get("format") == "date-time" for v in strings), (model, name, prop)


def test_statuses_are_an_enum_of_the_six_names(doc: dict[str, Any]) -> None:
    schemas = doc["components"]["schemas"]
    names = [s.name for s in JobStatus]
    assert schemas["StatusName"]["enum"] == names
    job = schemas["JobOut"]["properties"]
    assert resolve(doc, job["status"])["enum"] == names
    assert job["status_code"]["enum"] == [100, 200, 300, 400, 500, 600]
    assert {"$ref": "#/components/schemas/StatusName"} in schemas["EventOut"]["properties"]["to_status"][
        "anyOf"
    ]


def test_enqueueing_documents_idempotency_key_and_location(doc: dict[str, Any]) -> None:
    for path in ("/api/jobs", "/orders/{order_id}/invoice"):
        op = doc["paths"][path]["post"]
        header = next(p for p in op["parameters"] if p["name"] == "Idempotency-Key")
        assert header["in"] == "header" and header["schema"]["maxLength"] == 200
        assert "422" in header["description"]
        for code in ("200", "202"):
            assert "Location" in op["responses"][code]["headers"], (path, code)
    run = doc["paths"]["/api/periodic/{name}/run"]["post"]["responses"]["202"]
    assert "Location" in run["headers"]
    assert not any(p["name"] == "Idempotency-Key" for p in doc["paths"]["/api/jobs"]["get"]["parameters"])


def test_the_cursor_format_is_described(doc: dict[str, Any]) -> None:
    cursor = next(p for p in doc["paths"]["/api/jobs"]["get"]["parameters"] if p["name"] == "cursor")
    text = str(cursor)
    assert "base64" in text and "last_updated_at" in text and "pattern" in text
    next_cursor = doc["components"]["schemas"]["JobPage"]["properties"]["next_cursor"]
    assert "base64" in next_cursor["description"]


def test_integer_fields_say_integer_and_take_an_integral_number(doc: dict[str, Any], api_app: Flask) -> None:
    props = doc["components"]["schemas"]["EnqueueRequest"]["properties"]
    assert props["priority"]["type"] == "integer"
    response = api_app.test_client().post(
        "/api/jobs", json={"name": "echo", "priority": 7.0, "max_retries": 2.0}, headers=OPERATOR
    )
    assert response.status_code == 202
    assert (response.json["priority"], response.json["max_retries"]) == (7, 2)
