"""Async endpoints and custom status responses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from flask import Blueprint, Flask

from store.base import JobStore
from store.lifecycle import JobStatus
from tests.backends import StoreHandle
from tests.web.conftest import API_TOKENS, OPERATOR, VIEWER, api_app_for
from webapp.api import async_endpoint, problem_on_failure, set_job_status_response, summary_status_response

REPO = Path(__file__).resolve().parents[2]
FLASK = str(Path(sys.executable).parent / "flask")


@pytest.fixture
def orders_app(handle: StoreHandle) -> Flask:
    app = api_app_for(handle)
    async_endpoint(app, "/orders/<int:order_id>/invoice", "echo-request", queue="billing")
    return app


def post_invoice(app: Flask, **kwargs: object):
    headers = {
        **OPERATOR,
        "X-Request-Id": "req-1",
        "Accept-Language": "de",
        "Cookie": "session=secret",
        "X-Other": "not stored",
    }
    return app.test_client().post(
        "/orders/42/invoice?draft=1&tag=a&tag=b", json={"amount": 12}, headers=headers, **kwargs
    )


def test_async_endpoint_stores_the_request_on_the_job(orders_app: Flask, store: JobStore) -> None:
    response = post_invoice(orders_app)
    assert response.status_code == 202
    job = store.get(response.json["id"])
    assert response.headers["Location"] == f"/api/jobs/{job.id}"
    assert (job.name, job.queue, job.status) == ("echo-request", "billing", JobStatus.Queued)
    assert job.payload == {"amount": 12}
    assert job.route_params == {"order_id": 42}
    assert job.query_params == {"draft": "1", "tag": ["a", "b"]}
    assert job.headers == {
        "X-Request-Id": "req-1",
        "Content-Type": "application/json",
        "Accept-Language": "de",
    }
    assert "Authorization" not in job.headers and "Cookie" not in job.headers


def test_async_endpoint_needs_an_operator_token(orders_app: Flask, store: JobStore) -> None:
    client = orders_app.test_client()
    assert client.post("/orders/1/invoice", json={}).status_code == 401
    refused = client.post("/orders/1/invoice", json={}, headers=VIEWER)
    assert refused.status_code == 403
    assert refused.json["error"]["code"] == 403
    assert sum(store.counts().by_status.values()) == 0


def test_async_endpoint_errors_use_the_envelope(orders_app: Flask, store: JobStore) -> None:
    client = orders_app.test_client()
    bad = client.post("/orders/1/invoice", data="{", content_type="application/json", headers=OPERATOR)
    assert bad.status_code == 400 and bad.json["error"]["code"] == 400
    deep: object = 1
    for _ in range(40):
        deep = [deep]
    too_deep = client.post("/orders/1/invoice", json=deep, headers=OPERATOR)
    assert too_deep.status_code == 422
    wrong_method = client.get("/orders/1/invoice", headers=OPERATOR)
    assert wrong_method.status_code == 405
    assert wrong_method.json["error"]["code"] == 405
    nul = client.post("/orders/1/invoice?x=%00", json={}, headers=OPERATOR)
    assert nul.status_code == 422
    assert nul.json["error"]["field"] == "query_params.x"
    assert sum(store.counts().by_status.values()) == 0


def test_async_endpoint_honours_idempotency_keys(orders_app: Flask, store: JobStore) -> None:
    client = orders_app.test_client()
    headers = {**OPERATOR, "Idempotency-Key": "invoice-42"}
    first = client.post("/orders/42/invoice", json={"amount": 1}, headers=headers)
    again = client.post("/orders/42/invoice", json={"amount": 1}, headers=headers)
    assert (first.status_code, again.status_code) == (202, 202)
    assert first.json["id"] == again.json["id"]
    assert first.headers["Location"] == again.headers["Location"]
    other_order = client.post("/orders/43/invoice", json={"amount": 1}, headers=headers)
    assert other_order.status_code == 422  # another URL: other route parameters
    assert other_order.json["error"]["field"] == "Idempotency-Key"


def test_async_endpoint_on_a_blueprint(handle: StoreHandle, store: JobStore) -> None:
    app = api_app_for(handle)
    shop = Blueprint("shop", __name__, url_prefix="/shop")
    async_endpoint(shop, "/carts/<cart_id>/checkout", "echo-request", stored_headers=("X-Request-Id",))
    app.register_blueprint(shop)
    response = app.test_client().post(
        "/shop/carts/c-9/checkout", headers={**OPERATOR, "X-Request-Id": "r", "Accept-Language": "fr"}
    )
    assert response.status_code == 202
    job = store.get(response.json["id"])
    assert job.payload is None
    assert job.route_params == {"cart_id": "c-9"}
    assert job.headers == {"X-Request-Id": "r"}
    assert app.test_client().get("/shop/carts/c-9/checkout", headers=OPERATOR).json["error"]["code"] == 405


@pytest.mark.parametrize("header", ["Authorization", "cookie", "Proxy-Authorization", "Set-Cookie"])
def test_credential_headers_can_never_be_stored(handle: StoreHandle, header: str) -> None:
    app = api_app_for(handle)
    with pytest.raises(ValueError, match="credential"):
        async_endpoint(app, "/x", "echo-request", stored_headers=("X-Request-Id", header))


def test_async_endpoint_refuses_read_methods_and_bad_options(handle: StoreHandle) -> None:
    app = api_app_for(handle)
    with pytest.raises(ValueError, match="GET"):
        async_endpoint(app, "/x", "echo-request", methods=("GET",))
    with pytest.raises(ValueError, match="queue"):
        async_endpoint(app, "/y", "echo-request", queue="")


# ---------------------------------------------------------- status responses
def fail_for_good(store: JobStore, job_id: str) -> None:
    [claimed] = store.claim("w-1", ["default"])
    assert claimed.id == job_id
    store.fail(
        job_id,
        claimed.lease_token,
        {"type": "KeyError", "message": "sku", "traceback": "..."},
        permanent=True,
    )


def test_status_response_can_be_summarised(api_app: Flask, store: JobStore) -> None:
    set_job_status_response(api_app, summary_status_response)
    job = store.enqueue("echo", {"n": 1})
    got = api_app.test_client().get(f"/api/jobs/{job.id}", headers=VIEWER)
    assert got.status_code == 200
    assert got.json == {"id": job.id, "status": "Queued", "result": None}
    set_job_status_response(api_app, None)
    assert "payload" in api_app.test_client().get(f"/api/jobs/{job.id}", headers=VIEWER).json


def test_failed_job_can_answer_a_problem_document(api_app: Flask, store: JobStore) -> None:
    set_job_status_response(api_app, problem_on_failure)
    job = store.enqueue("echo", {"n": 1})
    client = api_app.test_client()
    assert client.get(f"/api/jobs/{job.id}", headers=VIEWER).json["status"] == "Queued"
    fail_for_good(store, job.id)
    failed = client.get(f"/api/jobs/{job.id}", headers=VIEWER)
    assert failed.status_code == 500
    assert failed.mimetype == "application/problem+json"
    problem = failed.get_json(force=True)
    assert problem["status"] == 500 and problem["title"] == "Job failed"
    assert problem["detail"] == "KeyError: sku"
    assert "traceback" not in failed.text


def test_status_response_factory_may_return_a_tuple(api_app: Flask, store: JobStore) -> None:
    set_job_status_response(api_app, lambda job: ({"state": job.status.name}, 299, {"X-Job": job.id}))
    job = store.enqueue("echo", {"n": 1})
    got = api_app.test_client().get(f"/api/jobs/{job.id}", headers=VIEWER)
    assert (got.status_code, got.json, got.headers["X-Job"]) == (299, {"state": "Queued"}, job.id)


# ------------------------------------------------------------ real worker
@pytest.mark.slow
def test_async_endpoint_round_trip_with_a_real_worker(orders_app: Flask, handle: StoreHandle) -> None:
    """POST -> 202 -> a real ``flask worker --burst`` runs the handler, which
    sees the stored request on its context -> GET the job's Location."""
    response = post_invoice(orders_app)
    assert response.status_code == 202
    env = {
        **os.environ,
        "LEASEHOLD_STORE_URL": handle.url,
        "LEASEHOLD_HANDLERS": "tests.web.api_handlers",
        "LEASEHOLD_API_TOKENS": API_TOKENS,
        "LEASEHOLD_SECRET_KEY": "api-tests-secret-0123456789abcdef0123456789",
        "PYTHONPATH": str(REPO),
    }
    worker = subprocess.run(
        [FLASK, "--app", "wsgi", "worker", "--burst", "--queues", "billing", "--concurrency", "1"],
        cwd=REPO,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    stderr = worker.stderr.decode()[-4000:]
    assert worker.returncode == 0, stderr
    done = orders_app.test_client().get(response.headers["Location"], headers=VIEWER)
    trail = orders_app.test_client().get(f"{response.headers['Location']}/events", headers=VIEWER)
    assert done.json["status"] == "Completed", (done.json, trail.json, stderr)
    assert done.json["result"] == {
        "payload": {"amount": 12},
        "headers": {"X-Request-Id": "req-1", "Content-Type": "application/json", "Accept-Language": "de"},
        "route_params": {"order_id": 42},
        "query_params": {"draft": "1", "tag": ["a", "b"]},
    }
