"""Console pages as an operator reads them (every store): attempt numbers
that never repeat, limits flagged when over, overdue workers, the audit's
links, the bulk panel's defaults."""

# ruff: noqa: F811 - the fixtures are imported from console_fixtures and requested by name
from __future__ import annotations

import re

from store import bulk
from store.base import JobStore
from store.lifecycle import JobStatus
from store.models import JobSpec
from tests.backends import StoreHandle
from tests.web.conftest import VIEWER, api_app_for
from tests.web.console_fixtures import (  # noqa: F401 - fixtures
    ConsoleClient,
    confirm_form,
    console_app,
    operator,
    viewer,
)

S = JobStatus


def _fail_once(store: JobStore, job_id: str) -> None:
    [claimed] = store.claim("w-1", ["default"])
    assert claimed.id == job_id
    store.fail(job_id, claimed.lease_token, {"type": "E", "message": "boom"}, worker_id="w-1")


def test_attempt_numbers_never_repeat_after_retry_now_keeping_retries(
    operator: ConsoleClient, store: JobStore
) -> None:
    job = store.enqueue("t", {}, max_retries=1)
    _fail_once(store, job.id)
    store.retry_now(job.id)
    _fail_once(store, job.id)
    assert store.get(job.id).status is S.Failed  # retries spent
    store.retry_now(job.id, actor="operator:ann")  # keeps them: the store numbers this one 2 again
    _fail_once(store, job.id)
    html = operator.get(f"/jobs/{job.id}").text
    shown = re.findall(r"Attempt (\d+) · token (\d+)", html)
    assert shown == [("1", "1"), ("2", "2"), ("3", "3")]


def test_api_lists_batches_newest_first_by_pages(handle: StoreHandle, store: JobStore) -> None:
    made = [store.create_batch([JobSpec("t", {"n": n})]) for n in range(3)]
    client = api_app_for(handle).test_client()
    first = client.get("/api/batches?limit=2", headers=VIEWER)
    assert first.status_code == 200
    body = first.get_json()
    assert [b["id"] for b in body["items"]] == [made[2].id, made[1].id]
    assert body["items"][0]["counts"] == {"Queued": 1} and body["items"][0]["created_at"].endswith("Z")
    rest = client.get(f"/api/batches?limit=2&cursor={body['next_cursor']}", headers=VIEWER).get_json()
    assert [b["id"] for b in rest["items"]] == [made[0].id] and rest["next_cursor"] is None
    bad = client.get("/api/batches?cursor=nope", headers=VIEWER)
    assert bad.status_code == 422 and "cursor" in bad.get_data(as_text=True)


def test_bulk_on_an_error_filter_and_on_selected_rows(operator: ConsoleClient, store: JobStore) -> None:
    jobs = [store.enqueue("t", {"i": i}) for i in range(4)]
    for job in store.claim("w", ["default"], 4):
        message = "smtp timeout" if job.payload["i"] < 2 else "bad input"
        store.fail(job.id, job.lease_token, {"type": "E", "message": message}, permanent=True)
    preview = operator.post("/jobs/bulk", {"action": "retry", "error": "timeout"}, htmx=True)
    assert preview.status_code == 200
    assert re.search(r"<strong>2</strong> job\(s\) match and can be retried now", preview.text)
    form = confirm_form(preview.text, {"action": "retry", "error": "timeout"})
    started = operator.post("/jobs/bulk", form)
    assert started.status_code == 303
    [op] = store.operations()
    assert op.filter == {"error": "timeout"}
    bulk.run_pending(store, "test")
    assert sorted(store.get(j.id).status.name for j in jobs) == ["Failed", "Failed", "Queued", "Queued"]

    chosen = [j.id for j in jobs if store.get(j.id).status is S.Failed][:1]
    picked = operator.client.post(
        "/jobs/bulk",
        data={"action": "requeue", "ids": chosen},
        headers={"HX-Request": "true", "X-CSRFToken": operator.token_for()},
    )
    assert "<strong>1</strong> job(s) match" in picked.text and "of 1 selected row(s)" in picked.text
    assert f'name="ids" value="{chosen[0]}"' in picked.text


INDEXER = {
    "name": "index-source",
    "queue": "indexing",
    "max_retries": 7,
    "timeout_s": 90.0,
    "lease_ttl_s": 30.0,
}


def test_new_job_form_enqueues_with_the_handlers_defaults(
    operator: ConsoleClient, viewer: ConsoleClient, store: JobStore
) -> None:
    from store.models import WorkerInfo, ts

    store.worker_heartbeat(
        WorkerInfo("w-1", "h", 1, ["indexing"], 2, started_at=ts(store.now()), handlers=[INDEXER])
    )
    form = operator.get("/jobs/new").text
    assert 'data-queue="indexing" data-max-retries="7" data-timeout-s="90.0"' in form
    assert viewer.get("/jobs/new").status_code == 403
    nonce = re.search(r'name="nonce" value="([0-9a-f]+)"', form).group(1)

    bad = operator.post("/jobs/new", {"name": "index-source", "payload": "{not json", "nonce": nonce})
    assert bad.status_code == 422 and "payload: is not JSON" in bad.text and 'aria-invalid="true"' in bad.text
    unknown = operator.post("/jobs/new", {"name": "nope", "payload": "{}", "nonce": nonce})
    assert unknown.status_code == 422 and "name:" in unknown.text
    assert store.list_jobs(limit=5).items == []

    good = {"name": "index-source", "payload": '{"path": "/src/a.py"}', "nonce": nonce}
    made = operator.post("/jobs/new", good)
    assert made.status_code == 303
    [job] = store.list_jobs(limit=5).items
    assert made.headers["Location"] == f"/jobs/{job.id}"
    assert (job.queue, job.max_retries, job.timeout_seconds, job.payload) == (
        "indexing",
        7,
        90.0,
        {"path": "/src/a.py"},
    )
    again = operator.post("/jobs/new", good)  # the same form posted twice: one job
    assert again.headers["Location"] == f"/jobs/{job.id}" and len(store.list_jobs(limit=5).items) == 1
    assert operator.post("/jobs/new", good, csrf=False).status_code == 400
