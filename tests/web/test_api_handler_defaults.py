"""POST /api/jobs takes a job's defaults from the handler catalogue the live
workers publish (on every store): the handler's queue, retries and timeout
unless the body gives its own; an unknown name is 422 once handlers are
known, and accepted while none is."""

from __future__ import annotations

from flask import Flask
from flask.testing import FlaskClient

from store.base import JobStore
from store.models import WorkerInfo, ts
from tests.store.test_contract_catalogue import SLOW
from tests.web.conftest import OPERATOR
from webapp.api.state import api_state


def _publish(store: JobStore) -> None:
    store.worker_heartbeat(
        WorkerInfo("w-1", "h", 1, ["slowq"], 1, started_at=ts(store.now()), handlers=[SLOW])
    )


def test_an_api_job_lands_where_its_handler_says(api_client: FlaskClient, store: JobStore) -> None:
    _publish(store)
    made = api_client.post("/api/jobs", json={"name": "slow"}, headers=OPERATOR)
    assert made.status_code == 202, made.json
    job = store.get(made.json["id"])
    assert (job.queue, job.max_retries, job.timeout_seconds) == ("slowq", 1, 120.0)
    mine = {"name": "slow", "queue": "default", "max_retries": 4, "timeout_s": 5}
    own = store.get(api_client.post("/api/jobs", json=mine, headers=OPERATOR).json["id"])
    assert (own.queue, own.max_retries, own.timeout_seconds) == ("default", 4, 5.0)  # explicit options win


def test_an_unknown_name_is_refused_once_handlers_are_known(
    api_app: Flask, api_client: FlaskClient, store: JobStore
) -> None:
    before = api_client.post("/api/jobs", json={"name": "no-such-handler"}, headers=OPERATOR)
    assert before.status_code == 202  # nothing known yet: accepted as it is
    _publish(store)
    api_state(api_app).catalogue.cache_s = 0  # the app reads the registry at most every 2 s
    refused = api_client.post("/api/jobs", json={"name": "no-such-handler"}, headers=OPERATOR)
    assert refused.status_code == 422
    error = refused.json["error"]
    assert error["field"] == "name" and "no-such-handler" in error["message"] and "slow" in error["message"]
    assert store.counts().to_json()["counts"]["Queued"] == 1  # nothing written


def test_a_periodic_run_now_takes_its_handlers_retries_and_timeout(
    api_client: FlaskClient, store: JobStore
) -> None:
    from store.models import Schedule

    _publish(store)
    store.save_schedules([Schedule("hourly-slow", "slow", "0 * * * *")])
    run = api_client.post("/api/periodic/hourly-slow/run", headers=OPERATOR)
    assert run.status_code == 202, run.json
    job = store.get(run.json["id"])
    assert (job.queue, job.max_retries, job.timeout_seconds) == ("default", 1, 120.0)  # the schedule's queue


def test_a_batch_takes_its_handlers_defaults_like_post_jobs(api_client: FlaskClient, store: JobStore) -> None:
    _publish(store)
    body = {
        "jobs": [{"name": "slow"}, {"name": "slow", "queue": "mine", "max_retries": 4}],
        "callback": {"name": "slow"},
    }
    made = api_client.post("/api/batches", json=body, headers=OPERATOR)
    assert made.status_code == 202, made.json
    jobs = sorted(store.batch_jobs(made.json["id"], 10), key=lambda j: j.queue)
    assert [(j.queue, j.max_retries, j.timeout_seconds) for j in jobs] == [
        ("mine", 4, 120.0),
        ("slowq", 1, 120.0),
    ]
    callback = store.get(made.json["callback_job_id"])
    assert (callback.queue, callback.max_retries, callback.timeout_seconds) == ("slowq", 1, 120.0)


def test_a_batch_with_an_unknown_name_is_refused_like_post_jobs(
    api_app: Flask, api_client: FlaskClient, store: JobStore
) -> None:
    _publish(store)
    for body, field in (
        ({"jobs": [{"name": "slow"}, {"name": "no-such-handler"}]}, "jobs.1.name"),
        ({"jobs": [{"name": "slow"}], "callback": {"name": "no-such-handler"}}, "callback.name"),
    ):
        refused = api_client.post("/api/batches", json=body, headers=OPERATOR)
        assert refused.status_code == 422, refused.json
        assert (
            refused.json["error"]["field"] == field and "no-such-handler" in refused.json["error"]["message"]
        )
    assert store.counts().to_json()["counts"]["Queued"] == 0  # nothing written
