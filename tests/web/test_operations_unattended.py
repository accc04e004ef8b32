"""Operations finish without a worker: one no worker has picked up within
``bulk.PICKUP_S`` seconds is run by the web app when it is read (API and
console), in the same batches under the same lock, so with a worker holding
the lock it is not run twice. ``GET /api/operations`` lists them, newest
first, paged; progress reads 1.0 at done, also when no job changed."""

from __future__ import annotations

from flask.testing import FlaskClient

from store import bulk
from store.base import JobStore
from store.lifecycle import JobStatus
from tests.store.helpers import job_in
from tests.web.conftest import OPERATOR, VIEWER
from tests.web.console_fixtures import ConsoleClient, console_app, viewer  # noqa: F401

S = JobStatus


def _start(client: FlaskClient, body: dict) -> str:
    response = client.post("/api/operations", json=body, headers=OPERATOR)
    assert response.status_code == 202, response.json
    return response.headers["Location"]


def test_an_operation_no_worker_picks_up_is_run_by_its_reader(
    api_client: FlaskClient, store: JobStore
) -> None:
    failed = [job_in(store, S.Failed, queue="mail").id for _ in range(3)]
    location = _start(api_client, {"action": "retry", "filter": {"status": "Failed", "queue": "mail"}})
    early = api_client.get(location, headers=VIEWER).json
    assert early["state"] == "queued"  # a worker may still pick it up
    assert all(store.get(i).status is S.Failed for i in failed)

    store.clock_offset_s += bulk.PICKUP_S + 1  # a worker would have started it by now
    done = api_client.get(location, headers=VIEWER).json
    assert (done["state"], done["changed"], done["progress"]) == ("done", 3, 1.0)
    assert all(store.get(i).status is S.Queued for i in failed)


def test_a_worker_holding_the_lock_keeps_it_to_itself(api_client: FlaskClient, store: JobStore) -> None:
    job_in(store, S.Failed)
    location = _start(api_client, {"action": "retry", "filter": {"status": "Failed"}})
    store.clock_offset_s += bulk.PICKUP_S + 1
    assert store.acquire_lock(bulk.OPERATIONS_LOCK, "worker-1", 60)
    assert api_client.get(location, headers=VIEWER).json["state"] == "queued"
    store.release_lock(bulk.OPERATIONS_LOCK, "worker-1")
    assert api_client.get(location, headers=VIEWER).json["state"] == "done"


def test_the_console_page_runs_it_too_and_shows_100_percent(
    api_client: FlaskClient,
    store: JobStore,
    viewer: ConsoleClient,  # noqa: F811
) -> None:
    location = _start(api_client, {"action": "cancel", "filter": {"queue": "empty"}})
    operation_id = location.rsplit("/", 1)[1]
    store.clock_offset_s += bulk.PICKUP_S + 1
    operation = store.get_operation(operation_id)
    assert operation is not None and operation.state == "queued"
    page = viewer.get(f"/operations/{operation_id}")
    assert page.status_code == 200
    done = store.get_operation(operation_id)
    assert done is not None and (done.state, done.changed, done.progress) == ("done", 0, 1.0)
    assert 'aria-valuenow="100"' in page.text
    assert api_client.get(location, headers=VIEWER).json["progress"] == 1.0


def test_operations_are_listed_newest_first_and_paged(api_client: FlaskClient, store: JobStore) -> None:
    ids = []
    for queue in ("a", "b", "c"):
        ids.append(_start(api_client, {"action": "cancel", "filter": {"queue": queue}}).rsplit("/", 1)[1])
        store.clock_offset_s += 1
    first = api_client.get("/api/operations?limit=2", headers=VIEWER)
    assert first.status_code == 200, first.json
    assert [o["id"] for o in first.json["items"]] == ids[::-1][:2]
    second = api_client.get(f"/api/operations?limit=2&cursor={first.json['next_cursor']}", headers=VIEWER)
    assert [o["id"] for o in second.json["items"]] == ids[:1]
    assert second.json["next_cursor"] is None
    assert api_client.get("/api/operations?cursor=x", headers=VIEWER).status_code == 422


def test_progress_is_one_at_done_whatever_the_counts() -> None:
    from store.models import BulkOperation

    done = BulkOperation("o", "retry", {}, "operator:a", expected=5, state="done", changed=0, skipped=0)
    assert (done.progress, done.to_json()["progress"]) == (1.0, 1.0)
    running = BulkOperation("o", "retry", {}, "operator:a", expected=4, state="running", changed=1)
    assert running.progress == 0.25
