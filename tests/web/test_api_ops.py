"""Operations routes: stats, workers, recovery, metrics, OpenAPI, health."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from flask import Flask
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families

from store.base import RECOVERY_LOCK, JobStore
from store.errors import LeaseLost
from store.lifecycle import JobStatus
from store.models import WorkerInfo
from tests.backends import StoreHandle
from tests.web.conftest import OPERATOR, VIEWER, api_app_for
from webapp import create_app
from webapp.api import async_endpoint


def expire_one_lease(store: JobStore, max_retries: int = 3) -> str:
    """A job whose lease expired (the store's clock moved past it)."""
    job = store.enqueue("echo", {"n": 1}, max_retries=max_retries)
    store.claim("w-dead", ["default"], lease_ttl_s=1)
    store.clock_offset_s += 120
    return job.id


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


# ------------------------------------------------------------------- stats
def test_stats_are_counts_plus_expired_leases(api_client: FlaskClient, store: JobStore) -> None:
    store.enqueue("a", None, queue="q1")
    expire_one_lease(store)
    stats = api_client.get("/api/stats", headers=VIEWER)
    assert stats.status_code == 200
    assert stats.json["counts"] == {**dict.fromkeys(s.name for s in JobStatus), **stats.json["counts"]}
    assert stats.json["counts"]["Queued"] == 1
    assert stats.json["counts"]["InProgress"] == 1
    assert stats.json["queues"]["q1"] == {"Queued": 1}
    assert stats.json["expired_leases"] == 1


def test_workers_lists_the_registry(api_client: FlaskClient, store: JobStore) -> None:
    store.worker_heartbeat(
        WorkerInfo(
            id="w-1", host="h1", pid=42, queues=["default"], concurrency=2, started_at=datetime.now(UTC)
        )
    )
    workers = api_client.get("/api/workers", headers=VIEWER)
    assert workers.status_code == 200
    [w] = workers.json["items"]
    assert (w["id"], w["host"], w["pid"], w["queues"], w["concurrency"]) == ("w-1", "h1", 42, ["default"], 2)
    assert w["seen_seconds_ago"] >= 0
    assert w["last_seen_at"].endswith("Z")


# ---------------------------------------------------------------- recovery
def test_recovery_preview_changes_nothing(api_client: FlaskClient, store: JobStore) -> None:
    job_id = expire_one_lease(store)
    preview = api_client.post("/api/recovery?dry_run=1", headers=OPERATOR)
    assert preview.status_code == 200
    assert preview.json["dry_run"] is True
    assert [r["id"] for r in preview.json["recovered"]] == [job_id]
    assert preview.json["failed"] == []
    assert store.get(job_id).status is JobStatus.InProgress
    assert store.recovery_runs() == []


def test_recovery_retries_and_fails_expired_leases_and_records_the_run(
    api_client: FlaskClient, store: JobStore
) -> None:
    retried = expire_one_lease(store, max_retries=3)
    spent = expire_one_lease(store, max_retries=0)
    response = api_client.post("/api/recovery", headers=OPERATOR)
    assert response.status_code == 200
    body = response.json
    assert body["dry_run"] is False
    assert [r["id"] for r in body["recovered"]] == [retried]
    assert [r["id"] for r in body["failed"]] == [spent]
    assert store.get(retried).status is JobStatus.Scheduled
    assert store.get(spent).status is JobStatus.Failed
    [run] = store.recovery_runs()
    assert (run.recovered, run.failed, run.trigger) == (1, 1, "operator:alice")
    assert store.lock_info(RECOVERY_LOCK).owner is None  # released
    again = api_client.post("/api/recovery", headers=OPERATOR).json
    assert again["recovered"] == [] and again["failed"] == []


def test_recovery_while_the_lock_is_held_is_409(api_client: FlaskClient, store: JobStore) -> None:
    job_id = expire_one_lease(store)
    assert store.acquire_lock(RECOVERY_LOCK, "worker-7", 600)
    response = api_client.post("/api/recovery", headers=OPERATOR)
    assert response.status_code == 409
    assert "worker-7" in response.json["error"]["message"]
    assert store.get(job_id).status is JobStatus.InProgress
    assert api_client.post("/api/recovery?dry_run=true", headers=OPERATOR).status_code == 200


# ----------------------------------------------------------------- metrics
def test_metrics_read_the_store(api_client: FlaskClient, store: JobStore) -> None:
    done = store.enqueue("echo", {"n": 1})
    [claimed] = store.claim("w-1", ["default"])
    store.complete(done.id, claimed.lease_token, {"ok": True})
    stale = store.enqueue("echo", {"n": 2})
    [held] = store.claim("w-1", ["default"])
    store.cancel(stale.id, actor="operator:test")
    with pytest.raises(LeaseLost):
        store.complete(stale.id, held.lease_token, None)
    expire_one_lease(store, max_retries=0)
    api_client.post("/api/recovery", headers=OPERATOR)

    response = api_client.get("/metrics", headers=VIEWER)
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain")
    got = samples(response.text)
    assert got[("leasehold_jobs_enqueued_total", ())] == 3
    assert got[("leasehold_jobs_completed_total", ())] == 1
    assert got[("leasehold_jobs_claimed_total", ())] == 3
    assert got[("leasehold_lease_expirations_total", ())] == 1
    per_queue = {labels: v for (name, labels), v in got.items() if name == "leasehold_queue_events_total"}
    assert per_queue == {
        (("kind", "completed"), ("queue", "default")): 1,
        (("kind", "enqueued"), ("queue", "default")): 3,
        (("kind", "lease_expired"), ("queue", "default")): 1,
    }
    assert got[("leasehold_stale_writes_refused_total", (("kind", "completion"),))] == 1
    assert got[("leasehold_stale_writes_refused_total", (("kind", "heartbeat"),))] == 0
    assert got[("leasehold_operator_actions_total", (("action", "cancel"),))] == 1
    assert got[("leasehold_jobs", (("queue", "default"), ("status", "Completed")))] == 1
    assert got[("leasehold_jobs", (("queue", "default"), ("status", "Failed")))] == 1
    assert got[("leasehold_jobs", (("queue", "default"), ("status", "Canceled")))] == 1
    assert got[("leasehold_expired_leases", ())] == 0
    assert got[("leasehold_recovery_last_run_jobs", (("outcome", "failed"),))] == 1
    assert got[("leasehold_recent_jobs_sampled", ())] == 1
    run = got[("leasehold_recent_job_run_seconds", (("percentile", "50"),))]
    assert run >= 0 and got[("leasehold_recent_job_run_seconds", (("percentile", "100"),))] == run
    assert ("leasehold_recent_job_queue_wait_seconds", (("percentile", "99"),)) in got
    families = {f.name: f.type for f in text_string_to_metric_families(response.text)}
    assert "histogram" not in families.values() and "gaugehistogram" not in families.values()
    assert not [name for name in families if "_by_" in name or name.endswith("_acks_refused")]


def test_metrics_agree_across_apps_and_keep_no_global_state(handle: StoreHandle) -> None:
    first, second = api_app_for(handle), api_app_for(handle)
    handle.store.enqueue("echo", {"n": 1})
    scrapes = [samples(app.test_client().get("/metrics", headers=VIEWER).text) for app in (first, second)]
    assert scrapes[0][("leasehold_jobs_enqueued_total", ())] == 1
    # Latency moves with the clock between the two scrapes; everything else must agree.
    latency = ("leasehold_queue_latency_seconds", (("queue", "default"),))
    ages = [scrape.pop(latency) for scrape in scrapes]
    assert 0 <= ages[0] <= ages[1] < ages[0] + 5
    assert scrapes[0] == scrapes[1]


def test_metrics_sample_size_is_configurable(handle: StoreHandle) -> None:
    from webapp.config import ConfigError

    app = api_app_for(handle, METRICS_SAMPLE_JOBS=0)
    text = app.test_client().get("/metrics", headers=VIEWER).text
    assert "leasehold_recent_job_run_seconds" not in text
    with pytest.raises(ConfigError, match="LEASEHOLD_METRICS_SAMPLE_JOBS"):
        api_app_for(handle, METRICS_SAMPLE_JOBS=501)


# ----------------------------------------------------------------- openapi
def test_openapi_documents_every_route_from_the_schemas(handle: StoreHandle) -> None:
    app = api_app_for(handle)
    async_endpoint(app, "/orders/<int:order_id>/invoice", "make-invoice")
    doc = app.test_client().get("/openapi.json", headers=VIEWER).json
    assert doc["openapi"].startswith("3.")
    paths = doc["paths"]
    assert set(paths["/api/jobs"]) == {"get", "post"}
    for path in (
        "/api/jobs/{job_id}",
        "/api/jobs/{job_id}/cancel",
        "/api/jobs/{job_id}/requeue",
        "/api/jobs/{job_id}/retry",
        "/api/jobs/{job_id}/events",
        "/api/recovery",
        "/api/stats",
        "/api/workers",
        "/metrics",
        "/healthz",
        "/openapi.json",
        "/orders/{order_id}/invoice",
    ):
        assert path in paths, path
    enqueue = doc["components"]["schemas"]["EnqueueRequest"]
    assert enqueue["additionalProperties"] is False
    assert enqueue["properties"]["name"]["maxLength"] == 200
    assert {"202", "401", "403", "409", "413", "422"} <= set(paths["/api/jobs"]["post"]["responses"])
    limit = next(p for p in paths["/api/jobs"]["get"]["parameters"] if p["name"] == "limit")
    assert (limit["schema"]["minimum"], limit["schema"]["maximum"]) == (1, 500)
    assert doc["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}
    assert doc["security"] == [{"bearer": []}]
    assert paths["/healthz"]["get"]["security"] == []


# ------------------------------------------------------------------ outage
@pytest.fixture
def unreachable_app(tmp_path) -> Flask:
    """An app whose store is a PostgreSQL server that is not there."""
    return create_app(
        {
            "STORE_URL": "postgresql+psycopg://postgres@127.0.0.1:9/nowhere",
            "API_TOKENS": "op-token:operator:alice,view-token:viewer",
            "SECRET_KEY": "x",
            "TESTING": True,
        }
    )


def test_store_outage_is_503_everywhere(unreachable_app: Flask) -> None:
    client = unreachable_app.test_client()
    health = client.get("/healthz")
    assert health.status_code == 503
    assert health.json["status"] == "unavailable"
    for method, url in (
        ("GET", "/api/stats"),
        ("POST", "/api/jobs"),
        ("GET", "/metrics"),
        ("GET", "/api/jobs"),
    ):
        response = client.open(
            url, method=method, json={"name": "x"} if method == "POST" else None, headers=OPERATOR
        )
        assert response.status_code == 503, (url, response.data[:300])
        assert response.json["error"]["code"] == 503
        assert response.headers["Retry-After"]


def test_a_response_that_breaks_its_schema_is_a_logged_500_in_the_envelope(
    api_client: FlaskClient,
    store: JobStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(store, "expired_lease_count", lambda: "many")
    response = api_client.get("/api/stats", headers=VIEWER)
    assert response.status_code == 500
    assert response.json == {"error": {"code": 500, "message": "internal error"}}
    assert "does not match its schema" in caplog.text


def test_openapi_is_the_same_document_under_concurrent_first_requests(api_app: Flask) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def fetch(_: int) -> dict:
        return api_app.test_client().get("/openapi.json", headers=VIEWER).json

    with ThreadPoolExecutor(8) as pool:
        docs = list(pool.map(fetch, range(8)))
    assert all(doc == docs[0] for doc in docs)
    assert "JobOut" in docs[0]["components"]["schemas"]
