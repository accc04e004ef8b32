"""A handler's metrics shown: GET /api/handlers/<name>/metrics and the
console's /handlers/<name> (every store), exact counts past the 500 a
listing page holds, the window checked, the name escaped."""

# ruff: noqa: F811 - the fixtures are imported from console_fixtures and requested by name
from __future__ import annotations

from flask.testing import FlaskClient

from store.base import JobStore
from store.models import JobSpec
from tests.web.conftest import VIEWER, api_app, api_client  # noqa: F401 - fixtures
from tests.web.console_fixtures import ConsoleClient, console_app, viewer  # noqa: F401 - fixtures

XSS = "<img src=x onerror=alert(1)>"
N = 620  # more than a listing page (500)


def _run(store: JobStore, name: str, n: int, run_s: float) -> None:
    store.enqueue_many([JobSpec(name, queue="mq") for _ in range(n)])
    jobs: list = []
    while len(jobs) < n:
        jobs += store.claim("w", ["mq"], 500)
    store.clock_offset_s += run_s
    store.complete_many([(j.id, j.lease_token, None) for j in jobs], return_jobs=False)


def test_api_answers_every_bucket_with_exact_counts(api_client: FlaskClient, store: JobStore) -> None:
    now = store.now()
    store.clock_offset_s += now // 60 * 60 + 61 - now  # a second into a minute
    _run(store, "m.a", N, 1.5)
    [bad] = (store.enqueue("m.a", queue="mq", max_retries=0),)
    [claimed] = store.claim("w", ["mq"], 1)
    store.fail(bad.id, claimed.lease_token, {"type": "E", "message": "x", "traceback": None})
    answer = api_client.get("/api/handlers/m.a/metrics?window=1h", headers=VIEWER)
    assert answer.status_code == 200
    body = answer.json
    assert body["handler"] == "m.a" and body["window"] == "1h" and len(body["buckets"]) == 60
    last = body["buckets"][-1]
    assert (last["succeeded"], last["failed"], last["retried"]) == (N, 1, 0)
    assert 1470 <= last["run_time_ms"]["p50"] <= last["run_time_ms"]["p99"] < 2600  # 1.5 s and real time
    assert set(last) == {"start", "succeeded", "failed", "retried", "run_time_ms"}
    day = api_client.get("/api/handlers/m.a/metrics?window=24h", headers=VIEWER).json
    assert len(day["buckets"]) == 96 and sum(b["succeeded"] for b in day["buckets"]) == N
    assert len(api_client.get("/api/handlers/m.a/metrics?window=7d", headers=VIEWER).json["buckets"]) == 168
    figures = api_client.get("/api/handlers/m.a/metrics", headers=VIEWER).json
    assert figures["window"] == "1h"
    never = api_client.get("/api/handlers/never.seen/metrics", headers=VIEWER)
    assert never.status_code == 200 and sum(b["succeeded"] for b in never.json["buckets"]) == 0


def test_api_refuses_a_bad_window_naming_the_field(api_client: FlaskClient, store: JobStore) -> None:
    answer = api_client.get("/api/handlers/m.a/metrics?window=2h", headers=VIEWER)
    assert answer.status_code == 422 and answer.json["error"]["field"] == "window"
    long = api_client.get(f"/api/handlers/{'x' * 201}/metrics", headers=VIEWER)
    assert long.status_code == 422 and long.json["error"]["field"] == "name"
    assert api_client.get("/api/handlers/m.a/metrics").status_code == 401


def test_the_handler_page_charts_and_tables_the_window(viewer: ConsoleClient, store: JobStore) -> None:
    _run(store, XSS, 3, 0.25)
    html = viewer.get("/handlers/" + XSS + "?window=24h").text
    assert XSS not in html and "&lt;img src=x" in html
    assert 'id="graph-runs"' in html and 'id="graph-run-time"' in html and "<title>" in html
    assert 'data-range="24h" aria-current="true"' in html
    assert html.count("<tr data-start=") == 96
    assert ">Succeeded <strong>3</strong>" in html
    fragment = viewer.get("/handlers/" + XSS, htmx=True).text
    assert 'id="handler-metrics"' in fragment and "<h1>" not in fragment
    assert fragment.count("<tr data-start=") == 60
