"""API of flow control: queue limits (PUT/GET, audited, 422 naming the
field), enqueue with limit_key and depends_on, batches (POST, GET, cancel),
a job's dependencies."""

from __future__ import annotations

from flask.testing import FlaskClient

from store.base import JobStore
from store.flow_rules import QueueLimits, Rate
from store.lifecycle import EventKind, JobStatus
from tests.conftest import handle_fixture
from tests.web.conftest import OPERATOR, VIEWER

S = JobStatus
handle = handle_fixture(["sqlite", "postgresql", "redis"])


def test_put_limits_sets_clears_and_audits(api_client: FlaskClient, store: JobStore) -> None:
    body = {"concurrency": 3, "rate": {"limit": 10, "period_s": 1}}
    response = api_client.put("/api/queues/mail/limits", json=body, headers=OPERATOR)
    assert response.status_code == 200, response.json
    assert response.json["concurrency"] == 3 and response.json["rate"] == {"limit": 10, "period_s": 1.0}
    assert response.json["in_use"] == {"concurrency": 0, "rate": 0}
    entry = store.audit(1)[0]
    assert (entry.kind, entry.actor) == (EventKind.QUEUE_LIMITS_SET, "operator:alice")
    # A key left out is kept; null clears one.
    response = api_client.put("/api/queues/mail/limits", json={"concurrency": None}, headers=OPERATOR)
    assert response.json["concurrency"] is None and response.json["rate"]["limit"] == 10
    got = api_client.get("/api/queues/mail/limits", headers=VIEWER)
    assert got.status_code == 200 and got.json["rate"]["limit"] == 10


def test_put_limits_refuses_bad_values_naming_the_field(api_client: FlaskClient, store: JobStore) -> None:
    for body, field in (
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": "3"}, "concurrency"),
        ({"rate": {"limit": 5}}, "rate.period_s"),
        ({"per_key_rate": {"limit": 0, "period_s": 1}}, "per_key_rate.limit"),
        ({"speed": 1}, "speed"),
    ):
        response = api_client.put("/api/queues/mail/limits", json=body, headers=OPERATOR)
        assert response.status_code == 422, body
        assert response.json["error"]["field"] == field
    assert store.queue_limits() == {}
    assert (
        api_client.put("/api/queues/mail/limits", json={"concurrency": 1}, headers=VIEWER).status_code == 403
    )


def test_enqueue_with_limit_key_and_dependencies(api_client: FlaskClient, store: JobStore) -> None:
    parent = api_client.post("/api/jobs", json={"name": "p", "limit_key": "acme"}, headers=OPERATOR)
    assert parent.status_code == 202 and parent.json["limit_key"] == "acme"
    child = api_client.post(
        "/api/jobs",
        json={"name": "c", "depends_on": [parent.json["id"]], "on_parent_failure": "run"},
        headers=OPERATOR,
    )
    assert child.status_code == 202, child.json
    assert (child.json["status"], child.json["pending_parents"]) == ("Scheduled", 1)
    deps = api_client.get(f"/api/jobs/{child.json['id']}/dependencies", headers=VIEWER).json
    assert [p["id"] for p in deps["parents"]] == [parent.json["id"]] and deps["children"] == []
    bad = api_client.post("/api/jobs", json={"name": "c", "depends_on": ["nope"]}, headers=OPERATOR)
    assert bad.status_code == 422 and bad.json["error"]["field"].startswith("depends_on")
    missing = "0190c0de-0000-7000-8000-000000000000"
    bad = api_client.post("/api/jobs", json={"name": "c", "depends_on": [missing]}, headers=OPERATOR)
    assert bad.status_code == 422 and bad.json["error"]["field"] == "depends_on"


def test_batches_post_get_cancel(api_client: FlaskClient, store: JobStore) -> None:
    body = {
        "jobs": [{"name": "t", "payload": {"i": i}, "queue": "b"} for i in range(3)],
        "callback": {"name": "cb"},
    }
    created = api_client.post("/api/batches", json=body, headers=OPERATOR)
    assert created.status_code == 202, created.json
    assert created.headers["Location"].endswith(f"/api/batches/{created.json['id']}")
    batch = api_client.get(created.headers["Location"], headers=VIEWER).json
    assert batch["counts"] == {"Queued": 3} and batch["finished"] is False
    callback = store.get(batch["callback_job_id"])
    assert callback.status is S.Scheduled and callback.pending_parents == 3
    for job in store.claim("w", ["b"], 10):
        store.complete(job.id, job.lease_token, None)
    done = api_client.get(f"/api/batches/{batch['id']}", headers=VIEWER).json
    assert done["counts"] == {"Completed": 3} and done["finished"] is True
    assert store.get(batch["callback_job_id"]).status is S.Queued

    second = api_client.post("/api/batches", json={"jobs": [{"name": "t"}]}, headers=OPERATOR).json
    canceled = api_client.post(f"/api/batches/{second['id']}/cancel", headers=OPERATOR)
    assert canceled.status_code == 200 and canceled.json["counts"] == {"Canceled": 1}
    assert store.audit(1)[0].kind == EventKind.BATCH_CANCELED


def test_batches_refuse_bad_bodies_naming_the_field(api_client: FlaskClient, store: JobStore) -> None:
    bad = api_client.post("/api/batches", json={"jobs": [{"name": "t"}, {"queue": "x"}]}, headers=OPERATOR)
    assert bad.status_code == 422 and bad.json["error"]["field"] == "jobs.1.name"
    bad = api_client.post("/api/batches", json={"jobs": []}, headers=OPERATOR)
    assert bad.status_code == 422 and bad.json["error"]["field"] == "jobs"
    bad = api_client.post(
        "/api/batches", json={"jobs": [{"name": "t"}], "callback": {"priority": "x"}}, headers=OPERATOR
    )
    assert bad.status_code == 422 and bad.json["error"]["field"].startswith("callback")
    assert store.counts().by_status.get("Queued", 0) == 0
    assert api_client.get("/api/batches/nope", headers=VIEWER).status_code == 404


def test_metrics_show_each_limit_and_its_use(api_client: FlaskClient, store: JobStore) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    def scrape() -> dict[tuple[str, tuple], float]:
        text = api_client.get("/metrics", headers=VIEWER).text
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name.startswith("leasehold_queue_limit")
        }

    assert scrape() == {}
    store.set_queue_limits("mail", QueueLimits(concurrency=3, per_key_rate=Rate(5, 60.0)))
    for key in ("a", "a", "b"):
        store.enqueue("t", None, queue="mail", limit_key=key)
    store.claim("w", ["mail"], 10)
    series = scrape()
    assert series == {
        ("leasehold_queue_limit", (("kind", "concurrency"), ("queue", "mail"))): 3.0,
        ("leasehold_queue_limit", (("kind", "per_key_rate"), ("queue", "mail"))): 5.0,
        ("leasehold_queue_limit_in_use", (("kind", "concurrency"), ("queue", "mail"))): 3.0,
        ("leasehold_queue_limit_in_use", (("kind", "per_key_rate"), ("queue", "mail"))): 2.0,
    }


def test_a_batch_answers_its_job_ids_and_created_at(api_client: FlaskClient, handle, store: JobStore) -> None:
    from datetime import UTC, datetime

    body = {"jobs": [{"name": "t", "payload": {"i": i}} for i in range(3)]}
    created = api_client.post("/api/batches", json=body, headers=OPERATOR)
    assert created.status_code == 202, created.json
    got = api_client.get(created.headers["Location"], headers=VIEWER).json
    made_at = datetime.fromisoformat(got["created_at"])
    assert abs(made_at.timestamp() - store.now()) < 60 and made_at.tzinfo == UTC
    ids = sorted(j.id for j in store.batch_jobs(got["id"], 10))
    assert sorted(got["job_ids"]) == ids and len(ids) == 3
    assert created.json["job_ids"] == got["job_ids"]


def test_a_batch_carries_run_at_and_expiry_on_its_jobs(api_client: FlaskClient, store: JobStore) -> None:
    from datetime import datetime, timedelta, timezone

    now = store.now()
    later = datetime.fromtimestamp(round(now) + 600, timezone(timedelta(hours=-5)))
    body = {
        "jobs": [
            {"name": "t", "payload": {"i": 0}, "run_at": later.isoformat()},
            {"name": "t", "payload": {"i": 1}, "queue": "soon", "expires_in_s": 30},
            {"name": "t", "payload": {"i": 2}, "run_at": now + 60, "expires_at": now + 900},
        ]
    }
    created = api_client.post("/api/batches", json=body, headers=OPERATOR)
    assert created.status_code == 202, created.json
    at, expiring, both = (store.get(i) for i in created.json["job_ids"])
    assert [j.payload["i"] for j in (at, expiring, both)] == [0, 1, 2]
    assert at.status is S.Scheduled and at.expires_at is None
    assert round(now) + 600 <= at.retry_delay_until.timestamp() < round(now) + 600.05
    assert expiring.status is S.Queued and abs(expiring.expires_at.timestamp() - (now + 30)) < 5
    assert both.status is S.Scheduled and abs(both.retry_delay_until.timestamp() - (now + 60)) < 1
    assert abs(both.expires_at.timestamp() - (now + 900)) < 1
    shown = api_client.get(f"/api/jobs/{expiring.id}", headers=VIEWER).json
    assert shown["expires_at"].endswith("Z")
    store.clock_offset_s += 31  # type: ignore[attr-defined]
    assert store.claim("w", ["soon"], 1) == []  # past its expiry: never handed out
    assert store.get(expiring.id).error["type"] == "Expired"


def test_a_batch_with_a_bad_time_is_refused_naming_the_job_and_field(
    api_client: FlaskClient, store: JobStore
) -> None:
    for job, field in (
        ({"run_at": "tomorrow"}, "jobs.1.run_at"),
        ({"run_at": "2030-01-01T09:00:00"}, "jobs.1.run_at"),  # no offset: which clock?
        ({"expires_in_s": -1}, "jobs.1.expires_in_s"),
        ({"expires_in_s": 5, "expires_at": store.now() + 60}, "jobs.1.expires_in_s"),
        ({"run_at": store.now() + 60, "delay_s": 5}, "jobs.1.run_at"),
        ({"run_at": store.now() + 400 * 86400}, "jobs.1.run_at"),  # more than a year away
        ({"delay_s": 60, "expires_at": store.now() + 30}, "jobs.1.expires_at"),  # before it may run
    ):
        body = {"jobs": [{"name": "t"}, {"name": "t", **job}]}
        bad = api_client.post("/api/batches", json=body, headers=OPERATOR)
        assert bad.status_code == 422, (job, bad.json)
        assert bad.json["error"]["field"] == field, (job, bad.json)
    assert sum(store.counts().by_status.values()) == 0
