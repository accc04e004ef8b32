"""Bad input gets a 4xx in the error envelope, never a 500, never a partial write."""

from __future__ import annotations

import string

import pytest
from flask import Flask
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.base import JobStore
from tests.web.conftest import OPERATOR, VIEWER
from webapp.api.bodies import MAX_JSON_DEPTH, MAX_JSON_ITEMS


def error_of(response, code: int) -> dict:
    assert response.status_code == code, (response.status_code, response.data[:300])
    assert response.is_json, response.data[:300]
    error = response.json["error"]
    assert error["code"] == code
    assert "Traceback" not in error["message"]
    return error


def nothing_written(store: JobStore) -> bool:
    return sum(store.counts().by_status.values()) == 0


def test_malformed_json_is_400(api_client: FlaskClient, store: JobStore) -> None:
    for raw in (b"{", b'{"name": "x",}', b'{"name": NaN}', b"\xff\xfe", b'{"name": "\\ud800"}'):
        response = api_client.post("/api/jobs", data=raw, content_type="application/json", headers=OPERATOR)
        error_of(response, 400)
    assert nothing_written(store)


def test_body_that_is_not_json_is_415(api_client: FlaskClient) -> None:
    response = api_client.post("/api/jobs", data="name=x", content_type="text/plain", headers=OPERATOR)
    error_of(response, 415)


def test_body_over_max_content_length_is_413(api_client: FlaskClient, store: JobStore) -> None:
    big = b'{"name": "x", "payload": "' + b"a" * (2 * 1024 * 1024) + b'"}'
    response = api_client.post("/api/jobs", data=big, content_type="application/json", headers=OPERATOR)
    error_of(response, 413)
    assert nothing_written(store)


def test_max_content_length_is_configurable(handle) -> None:
    from tests.web.conftest import api_app_for

    app = api_app_for(handle, MAX_CONTENT_LENGTH=100)
    response = app.test_client().post("/api/jobs", json={"name": "x", "payload": "a" * 200}, headers=OPERATOR)
    error_of(response, 413)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "x", "bogus": 1}, "bogus"),
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "   "}, "name"),
        ({"name": "x" * 201}, "name"),
        ({"name": "x", "queue": "q" * 101}, "queue"),
        ({"name": "a\nb"}, "name"),
        ({"name": 5}, "name"),
        ({"name": "x", "priority": "5"}, "priority"),
        ({"name": "x", "priority": 1.5}, "priority"),
        ({"name": "x", "priority": True}, "priority"),
        ({"name": "x", "priority": 10**7}, "priority"),
        ({"name": "x", "max_retries": -1}, "max_retries"),
        ({"name": "x", "max_retries": 101}, "max_retries"),
        ({"name": "x", "timeout_s": 0}, "timeout_s"),
        ({"name": "x", "lease_ttl_s": 0.01}, "lease_ttl_s"),
        ({"name": "x", "delay_s": -1}, "delay_s"),
        ({"name": "x", "delay_s": 1e12}, "delay_s"),
        ({"name": "x", "run_at": "2030-01-01T00:00:00"}, "run_at"),  # no UTC offset: which clock?
        ({"name": "x", "run_at": "soon"}, "run_at"),
        ({"name": "x", "run_at": 1e12}, "run_at"),
        ({"name": "x", "run_at": 2e9, "delay_s": 5}, "run_at"),
        ({"name": "x", "expires_in_s": 0}, "expires_in_s"),
        ({"name": "x", "expires_in_s": 5, "expires_at": 2e9}, "expires_in_s"),
        ({"name": "x", "run_at": 2e9, "expires_at": 2e9 - 1}, "expires_at"),
        ({"name": "x", "payload": {"k": "nul\u0000"}}, "payload.k"),
        ({"name": "x", "payload": {"nul\u0000": 1}}, "payload"),
        ({"name": "x", "payload": list(range(MAX_JSON_ITEMS + 1))}, "payload"),
        ([{"name": "x"}], "body"),
    ],
)
def test_invalid_enqueue_is_422_naming_the_field(
    api_client: FlaskClient, store: JobStore, body: object, field: str
) -> None:
    response = api_client.post("/api/jobs", json=body, headers=OPERATOR)
    error = error_of(response, 422)
    assert error["field"] == field
    assert nothing_written(store)


def test_too_deep_json_is_422(api_client: FlaskClient, store: JobStore) -> None:
    value: object = "leaf"
    for _ in range(MAX_JSON_DEPTH):
        value = [value]
    error = error_of(
        api_client.post("/api/jobs", json={"name": "x", "payload": value}, headers=OPERATOR), 422
    )
    assert error["field"].startswith("payload")
    assert "deeper" in error["message"]
    very_deep = b'{"name": "x", "payload": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    response = api_client.post("/api/jobs", data=very_deep, content_type="application/json", headers=OPERATOR)
    error_of(response, 422)
    assert nothing_written(store)


def test_json_at_the_depth_limit_is_accepted(api_client: FlaskClient) -> None:
    value: object = "leaf"
    for _ in range(MAX_JSON_DEPTH - 2):  # the body object and "payload" are two levels
        value = [value]
    assert (
        api_client.post("/api/jobs", json={"name": "x", "payload": value}, headers=OPERATOR).status_code
        == 202
    )


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=ten", "limit"),
        ("limit=1&limit=2", "limit"),
        ("status=Running", "status"),
        ("queue=" + "q" * 101, "queue"),
        ("name=%00", "name"),
        ("cursor=%21%21", "cursor"),
        ("cursor=bm90LWEtY3Vyc29y", "cursor"),
        ("bogus=1", "bogus"),
    ],
)
def test_bad_list_query_is_422_naming_the_field(api_client: FlaskClient, query: str, field: str) -> None:
    error = error_of(api_client.get(f"/api/jobs?{query}", headers=VIEWER), 422)
    assert error["field"] == field


def test_bad_requeue_body_is_422(api_client: FlaskClient) -> None:
    job_id = api_client.post("/api/jobs", json={"name": "x"}, headers=OPERATOR).json["id"]
    api_client.post(f"/api/jobs/{job_id}/cancel", headers=OPERATOR)
    for body, field in (({"reset_retries": "yes"}, "reset_retries"), ({"other": 1}, "other")):
        error = error_of(api_client.post(f"/api/jobs/{job_id}/requeue", json=body, headers=OPERATOR), 422)
        assert error["field"] == field
    assert api_client.get(f"/api/jobs/{job_id}", headers=VIEWER).json["status"] == "Canceled"


@pytest.mark.parametrize("key", ["", "x" * 201, "tab\there", "é"])
def test_bad_idempotency_key_is_422(api_client: FlaskClient, store: JobStore, key: str) -> None:
    headers = {**OPERATOR, "Idempotency-Key": key}
    error = error_of(api_client.post("/api/jobs", json={"name": "x"}, headers=headers), 422)
    assert error["field"] == "Idempotency-Key"
    assert nothing_written(store)


def test_bad_events_limit_and_recovery_flag_are_422(api_client: FlaskClient) -> None:
    job_id = api_client.post("/api/jobs", json={"name": "x"}, headers=OPERATOR).json["id"]
    assert (
        error_of(api_client.get(f"/api/jobs/{job_id}/events?limit=0", headers=VIEWER), 422)["field"]
        == "limit"
    )
    assert (
        error_of(api_client.post("/api/recovery?dry_run=maybe", headers=OPERATOR), 422)["field"] == "dry_run"
    )


# ------------------------------------------------------------- property-based
_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=20,
)
_FIELDS = [
    "name",
    "payload",
    "queue",
    "priority",
    "max_retries",
    "timeout_s",
    "lease_ttl_s",
    "delay_s",
    "extra",
]
_BODIES = st.one_of(
    st.dictionaries(st.sampled_from(_FIELDS), _JSON, max_size=6),
    st.fixed_dictionaries(
        {"name": st.text(string.printable, min_size=0, max_size=210) | st.text(min_size=1, max_size=210)},
        optional={
            "payload": _JSON,
            "queue": st.text(max_size=110),
            "priority": st.integers(-(10**7), 10**7),
            "max_retries": st.integers(-5, 200),
            "timeout_s": st.floats(allow_nan=False) | st.integers(),
            "delay_s": st.floats(allow_nan=False),
        },
    ),
    _JSON,
)
_QUERY_KEYS = st.sampled_from(["status", "queue", "name", "limit", "cursor", "x"])
_QUERIES = st.lists(st.tuples(_QUERY_KEYS, st.text(max_size=20)), max_size=4)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_BODIES)
def test_enqueue_never_answers_500(api_app: Flask, handle, body: object) -> None:
    client = api_app.test_client()
    response = client.post("/api/jobs", json=body, headers=OPERATOR)
    assert response.status_code in (202, 400, 413, 422), (response.status_code, response.data[:300])
    assert response.is_json
    if response.status_code != 202:
        assert set(response.json) == {"error"}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=_QUERIES, raw=st.binary(max_size=64))
def test_list_and_raw_bodies_never_answer_500(
    api_app: Flask, query: list[tuple[str, str]], raw: bytes
) -> None:
    client = api_app.test_client()
    listed = client.get("/api/jobs", query_string=query, headers=VIEWER)
    assert listed.status_code in (200, 422), (listed.status_code, listed.data[:300])
    posted = client.post("/api/jobs", data=raw, content_type="application/json", headers=OPERATOR)
    assert posted.status_code in (202, 400, 422), (posted.status_code, posted.data[:300])
