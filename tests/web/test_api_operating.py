"""API routes of operating over months: delete, queues, purge, periodic, unique jobs."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from store.base import JobStore
from store.lifecycle import EventKind, JobStatus
from store.maintenance import RETENTION_LOCK
from store.models import Schedule
from tests.backends import StoreHandle
from tests.store.helpers import job_in
from tests.web.conftest import OPERATOR, VIEWER, api_app_for
from webapp.api import operating_api

S = JobStatus


# ------------------------------------------------------------------ delete
def test_delete_a_job_is_204_and_audited(api_client: FlaskClient, store: JobStore) -> None:
    job = store.enqueue("t", {"n": 1})
    response = api_client.delete(f"/api/jobs/{job.id}", headers=OPERATOR)
    assert response.status_code == 204 and response.data == b""
    assert api_client.get(f"/api/jobs/{job.id}", headers=VIEWER).status_code == 404
    [entry] = [e for e in store.audit() if e.kind == EventKind.DELETED]
    assert (entry.job_id, entry.actor) == (job.id, "operator:alice")


def test_delete_refuses_a_running_job_unknown_job_and_viewer(
    api_client: FlaskClient, store: JobStore
) -> None:
    running = job_in(store, S.InProgress)
    response = api_client.delete(f"/api/jobs/{running.id}", headers=OPERATOR)
    assert response.status_code == 409 and response.json["error"]["code"] == 409
    assert store.get(running.id).status is S.InProgress
    missing = "0190c0de-0000-7000-8000-000000000000"
    assert api_client.delete(f"/api/jobs/{missing}", headers=OPERATOR).status_code == 404
    assert api_client.delete(f"/api/jobs/{running.id}", headers=VIEWER).status_code == 403
    assert api_client.delete(f"/api/jobs/{running.id}").status_code == 401


# ------------------------------------------------------------------ queues
def test_queues_pause_resume(api_client: FlaskClient, store: JobStore) -> None:
    store.enqueue("t", None, queue="mail")
    store.enqueue("t", None, queue="mail")
    listed = api_client.get("/api/queues", headers=VIEWER)
    assert listed.status_code == 200
    [mail] = listed.json["items"]
    assert (mail["name"], mail["paused"], mail["changed_by"]) == ("mail", False, None)
    assert mail["counts"]["Queued"] == 2 and set(mail["counts"]) == {s.name for s in S}

    paused = api_client.post("/api/queues/mail/pause", headers=OPERATOR)
    assert paused.status_code == 200
    assert (paused.json["paused"], paused.json["changed_by"]) == (True, "operator:alice")
    assert paused.json["changed_at"].endswith("Z") and paused.json["counts"]["Queued"] == 2
    assert store.claim("w", ["mail"], 5) == []
    assert api_client.get("/api/queues", headers=VIEWER).json["items"][0]["paused"] is True

    resumed = api_client.post("/api/queues/mail/resume", headers=OPERATOR)
    assert (resumed.status_code, resumed.json["paused"]) == (200, False)
    assert len(store.claim("w", ["mail"], 5)) == 2
    kinds = [e.kind for e in store.audit()][:2]
    assert kinds == [EventKind.QUEUE_RESUMED, EventKind.QUEUE_PAUSED]


def test_a_queue_without_jobs_can_be_paused_and_is_listed(api_client: FlaskClient) -> None:
    assert api_client.post("/api/queues/empty/pause", headers=OPERATOR).status_code == 200
    [q] = api_client.get("/api/queues", headers=VIEWER).json["items"]
    assert (q["name"], q["paused"], q["counts"]["Queued"]) == ("empty", True, 0)


def test_viewer_cannot_pause(api_client: FlaskClient, store: JobStore) -> None:
    assert api_client.post("/api/queues/mail/pause", headers=VIEWER).status_code == 403
    assert store.queue_states() == []


# ------------------------------------------------------------------- purge
def _aged(store: JobStore) -> dict[JobStatus, str]:
    jobs = {s: job_in(store, s).id for s in (S.Completed, S.Failed, S.Canceled)}
    store.enqueue("waiting")
    return jobs


def test_purge_dry_run_counts_then_purges(api_client: FlaskClient, store: JobStore) -> None:
    _aged(store)
    store.clock_offset_s += 120
    dry = api_client.post("/api/purge?dry_run=1&older_than=60", headers=OPERATOR)
    assert (dry.status_code, dry.json) == (200, {"would_prune": 3})
    assert store.counts().by_status["Completed"] == 1
    done = api_client.post("/api/purge", json={"older_than": 60, "status": ["Completed"]}, headers=OPERATOR)
    assert (done.status_code, done.json["pruned"], done.json["more"]) == (200, 1, False)
    assert store.counts().by_status["Completed"] == 0
    assert (
        api_client.post("/api/purge?older_than=60&status=failed&status=Canceled", headers=OPERATOR).json[
            "pruned"
        ]
        == 2
    )
    assert store.counts().by_status["Queued"] == 1
    [last, first] = store.maintenance_runs("retention")[:2]
    assert (last.count, last.owner, first.count) == (2, "operator:alice", 1)


def test_purge_defaults_to_each_status_retention(handle: StoreHandle) -> None:
    app = api_app_for(handle, RETENTION_COMPLETED=100, RETENTION_FAILED=1000, RETENTION_CANCELED=0)
    client, store = app.test_client(), handle.store
    _aged(store)
    store.clock_offset_s += 500
    assert client.post("/api/purge?dry_run=1", headers=OPERATOR).json["would_prune"] == 1
    assert client.post("/api/purge", headers=OPERATOR).json["pruned"] == 1  # Completed only
    store.clock_offset_s += 1000
    assert client.post("/api/purge", headers=OPERATOR).json["pruned"] == 1  # Failed; Canceled kept forever
    assert store.counts().by_status["Canceled"] == 1


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("/api/purge?status=Queued", None, "status"),
        ("/api/purge?older_than=-1", None, "older_than"),
        ("/api/purge", {"status": ["Nope"]}, "status"),
        ("/api/purge", {"older_than": "60"}, "older_than"),
        ("/api/purge", {"oops": 1}, "oops"),
    ],
)
def test_purge_validation(api_client: FlaskClient, url: str, body: object, field: str) -> None:
    response = api_client.post(url, json=body, headers=OPERATOR)
    assert response.status_code == 422, response.json
    assert response.json["error"]["field"].startswith(field)


def _completed(store: JobStore, n: int) -> None:
    store.enqueue_many([("t", {"i": i}, "old") for i in range(n)])
    claimed = store.claim("w-setup", ["old"], limit=n)
    store.complete_many([(j.id, j.lease_token, None) for j in claimed], return_jobs=False)


def test_a_second_purge_with_the_same_token_is_refused_and_frees_nothing(
    api_app: Flask, store: JobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(operating_api, "PURGE_BATCH", 2)
    _completed(store, 6)
    store.clock_offset_s += 120
    second, holders = [], []
    real_purge = store.purge

    def purge(*args: Any, **kwargs: Any) -> int:
        holders.append(store.lock_info(RETENTION_LOCK).owner)
        if not second:  # in the first purge's first batch, the same token asks again
            with api_app.test_client() as other:
                second.append(other.post("/api/purge?older_than=60", headers=OPERATOR))
        return real_purge(*args, **kwargs)

    monkeypatch.setattr(store, "purge", purge)
    with api_app.test_client() as client:
        first = client.post("/api/purge?older_than=60", headers=OPERATOR)
    assert (first.status_code, first.json["pruned"]) == (200, 6)
    assert (
        second[0].status_code == 409 and "retention run is in progress" in second[0].json["error"]["message"]
    )
    assert len(holders) >= 3 and None not in holders  # the refused purge did not free the first one's lock
    assert len(set(holders)) == 1 and holders[0].startswith("operator:alice#")
    assert store.lock_info(RETENTION_LOCK).owner is None  # released at the end
    assert [r.owner for r in store.maintenance_runs("retention")] == ["operator:alice"]


def test_a_purge_extends_its_lock_between_batches(
    api_client: FlaskClient, store: JobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(operating_api, "PURGE_BATCH", 2)
    _completed(store, 6)
    store.clock_offset_s += 120
    holders = []
    real_purge = store.purge

    def slow_purge(*args: Any, **kwargs: Any) -> int:
        holders.append(store.lock_info(RETENTION_LOCK).owner)
        n = real_purge(*args, **kwargs)
        store.clock_offset_s += (
            operating_api.PURGE_LOCK_TTL_S * 0.75
        )  # each batch takes most of the lock's TTL
        return n

    monkeypatch.setattr(store, "purge", slow_purge)
    done = api_client.post("/api/purge?older_than=60", headers=OPERATOR)
    assert (done.status_code, done.json["pruned"]) == (200, 6)
    assert len(holders) >= 3 and None not in holders, holders  # still held at every batch


def test_viewer_cannot_purge(api_client: FlaskClient) -> None:
    assert api_client.post("/api/purge?dry_run=1", headers=VIEWER).status_code == 403


# ---------------------------------------------------------------- periodic
@pytest.fixture
def schedules(store: JobStore) -> JobStore:
    store.save_schedules(
        [
            Schedule("nightly", "report", "0 3 * * *", "Europe/Paris", "reports", {"full": True}),
            Schedule("often", "ping", "* * * * *"),
        ]
    )
    return store


def test_periodic_lists_schedules_in_words(api_client: FlaskClient, schedules: JobStore) -> None:
    response = api_client.get("/api/periodic", headers=VIEWER)
    assert response.status_code == 200
    items = {s["name"]: s for s in response.json["items"]}
    nightly = items["nightly"]
    assert nightly["description"] == "At 03:00, every day"
    assert (nightly["handler"], nightly["queue"], nightly["payload"]) == ("report", "reports", {"full": True})
    assert nightly["enabled"] is True and nightly["last_job_id"] is None
    assert nightly["next_run_at"].endswith(("T02:00:00.000Z", "T01:00:00.000Z"))  # 03:00 in Paris
    assert items["often"]["description"].startswith("Every minute")


def test_periodic_enable_disable_and_run(api_client: FlaskClient, schedules: JobStore) -> None:
    off = api_client.post("/api/periodic/nightly/disable", headers=OPERATOR)
    assert (off.status_code, off.json["enabled"], off.json["next_run_at"]) == (200, False, None)
    assert api_client.post("/api/periodic/nightly/enable", headers=OPERATOR).json["enabled"] is True
    run = api_client.post("/api/periodic/nightly/run", headers=OPERATOR)
    assert run.status_code == 202
    assert (run.json["name"], run.json["queue"], run.json["payload"]) == ("report", "reports", {"full": True})
    assert run.headers["Location"].endswith(run.json["id"])
    schedules.record_tick("nightly", schedules.now(), run.json["id"])
    [nightly] = [
        s for s in api_client.get("/api/periodic", headers=VIEWER).json["items"] if s["name"] == "nightly"
    ]
    assert (nightly["last_job_id"], nightly["last_job_status"]) == (run.json["id"], "Queued")


def test_periodic_unknown_name_and_roles(api_client: FlaskClient, schedules: JobStore) -> None:
    for action in ("enable", "disable", "run"):
        missing = api_client.post(f"/api/periodic/nope/{action}", headers=OPERATOR)
        assert (missing.status_code, missing.json["error"]["code"]) == (404, 404)
        assert api_client.post(f"/api/periodic/nightly/{action}", headers=VIEWER).status_code == 403
    assert api_client.get("/api/periodic").status_code == 401


# ------------------------------------------------------------- unique jobs
def test_unique_enqueue_answers_200_with_the_holder(api_client: FlaskClient) -> None:
    body = {"name": "sync", "payload": {"a": 1}, "unique_for": 60}
    first = api_client.post("/api/jobs", json=body, headers=OPERATOR)
    again = api_client.post("/api/jobs", json=body, headers=OPERATOR)
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json["id"] == first.json["id"]
    keyed = {"name": "sync", "payload": {"a": 2}, "unique_key": "sync:acme"}
    k1 = api_client.post("/api/jobs", json=keyed, headers=OPERATOR)
    k2 = api_client.post("/api/jobs", json={**keyed, "payload": {"a": 3}}, headers=OPERATOR)
    assert (k1.status_code, k2.status_code, k2.json["id"]) == (202, 200, k1.json["id"])


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"unique_for": -1}, "unique_for"),
        ({"unique_key": ""}, "unique_key"),
        ({"unique_for": "5"}, "unique_for"),
    ],
)
def test_unique_options_are_validated(api_client: FlaskClient, extra: dict, field: str) -> None:
    response = api_client.post("/api/jobs", json={"name": "x", **extra}, headers=OPERATOR)
    assert response.status_code == 422 and response.json["error"]["field"] == field


def test_openapi_documents_the_new_routes(api_app: Flask) -> None:
    paths = api_app.test_client().get("/openapi.json", headers=VIEWER).json["paths"]
    for path in ("/api/queues", "/api/purge", "/api/periodic", "/api/queues/{queue}/pause"):
        assert path in paths, sorted(paths)
    assert "delete" in paths["/api/jobs/{job_id}"]


# ----------------------------------------------------------------- metrics
def test_metrics_paused_queues_pruned_jobs_and_live_workers(api_client: FlaskClient, store: JobStore) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from store.models import WorkerInfo

    def scrape() -> dict[tuple[str, tuple], float]:
        text = api_client.get("/metrics", headers=VIEWER).text
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    store.worker_heartbeat(WorkerInfo("old", "h", 1, ["default"], 1))
    store.clock_offset_s += 3600
    api_client.post("/api/queues/mail/pause", headers=OPERATOR)
    api_client.post("/api/queues/default/pause", headers=OPERATOR)
    api_client.post("/api/queues/default/resume", headers=OPERATOR)
    job_in(store, S.Completed)
    store.clock_offset_s += 120
    store.worker_heartbeat(WorkerInfo("live", "h", 2, ["default"], 1))
    before = scrape()
    assert before[("leasehold_jobs_pruned_total", ())] == 0
    api_client.post("/api/purge?older_than=60", headers=OPERATOR)
    got = scrape()
    assert got[("leasehold_queue_paused", (("queue", "mail"),))] == 1
    assert got[("leasehold_queue_paused", (("queue", "default"),))] == 0
    assert got[("leasehold_jobs_pruned_total", ())] == 1
    assert got[("leasehold_workers", ())] == 1
    assert got[("leasehold_workers_registered", ())] == 2
