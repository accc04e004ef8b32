"""Console actions: operators act, viewers are refused, every POST needs CSRF (every store)."""

# ruff: noqa: F811 - the fixtures are imported from console_fixtures and requested by name
from __future__ import annotations

import re

import pytest

from store import bulk
from store.base import RECOVERY_LOCK, JobStore
from store.lifecycle import JobStatus
from tests.store.helpers import expire_leases, job_in
from tests.web.console_fixtures import (  # noqa: F401 - fixtures
    ConsoleClient,
    confirm_form,
    console_app,
    operator,
    viewer,
)

S = JobStatus

ACTIONS = [
    ("cancel", S.Queued, {}, S.Canceled),
    ("requeue", S.Failed, {"mode": "fresh"}, S.Queued),
    ("retry", S.Failed, {}, S.Queued),
]


def last_event(store: JobStore, job_id: str):
    return store.events(job_id)[-1]


@pytest.mark.parametrize(("action", "start", "form", "end"), ACTIONS)
def test_operator_action_with_htmx_returns_the_fragment(
    operator: ConsoleClient, store: JobStore, action: str, start: JobStatus, form: dict, end: JobStatus
) -> None:
    job = job_in(store, start)
    response = operator.post(f"/jobs/{job.id}/{action}", form, htmx=True)
    assert response.status_code == 200
    assert response.text.lstrip().startswith('<div id="job-live"')
    assert "by ann." in response.text
    assert store.get(job.id).status is end
    assert last_event(store, job.id).actor == "operator:ann"


@pytest.mark.parametrize(("action", "start", "form", "end"), ACTIONS)
def test_operator_action_without_javascript_redirects_back(
    operator: ConsoleClient, store: JobStore, action: str, start: JobStatus, form: dict, end: JobStatus
) -> None:
    job = job_in(store, start)
    response = operator.post(f"/jobs/{job.id}/{action}", form)
    assert response.status_code == 303 and response.headers["Location"] == f"/jobs/{job.id}"
    assert store.get(job.id).status is end
    assert "by ann." in operator.get(f"/jobs/{job.id}").text  # the flashed message


@pytest.mark.parametrize(("action", "start", "form", "end"), ACTIONS)
def test_viewer_is_refused_and_sees_no_buttons(
    viewer: ConsoleClient, store: JobStore, action: str, start: JobStatus, form: dict, end: JobStatus
) -> None:
    job = job_in(store, start)
    html = viewer.get(f"/jobs/{job.id}").text
    assert "<button" not in html.split('id="job-live"', 1)[1].split("</div>", 3)[0]
    assert not re.search(r'id="act-', html)
    assert viewer.post(f"/jobs/{job.id}/{action}", form).status_code == 403
    assert viewer.post(f"/jobs/{job.id}/{action}", form, htmx=True).status_code == 403
    assert store.get(job.id).status is start


@pytest.mark.parametrize(("action", "start", "form", "end"), ACTIONS)
def test_post_without_csrf_is_refused(
    operator: ConsoleClient, store: JobStore, action: str, start: JobStatus, form: dict, end: JobStatus
) -> None:
    job = job_in(store, start)
    response = operator.post(f"/jobs/{job.id}/{action}", form, csrf=False)
    assert response.status_code == 400
    assert "CSRF" in response.text
    assert store.get(job.id).status is start


def test_other_posts_need_csrf_too(operator: ConsoleClient) -> None:
    assert operator.post("/jobs/bulk", {"action": "cancel"}, csrf=False).status_code == 400
    assert operator.post("/recovery/run", csrf=False).status_code == 400
    bad = operator.client.post("/recovery/run", headers={"X-CSRFToken": "forged"})
    assert bad.status_code == 400


def test_invalid_transition_is_409_with_a_friendly_message_in_place(
    operator: ConsoleClient, store: JobStore
) -> None:
    job = job_in(store, S.Completed)
    response = operator.post(f"/jobs/{job.id}/retry", htmx=True)
    assert response.status_code == 409
    assert response.text.lstrip().startswith('<div id="job-live"')
    assert "This job is Completed now and cannot be retried now" in response.text
    plain = operator.post(f"/jobs/{job.id}/requeue", {"mode": "fresh"})
    assert plain.status_code == 409 and "<html" in plain.text and "cannot be requeued" in plain.text


def test_requeue_modes(operator: ConsoleClient, store: JobStore) -> None:
    job = store.enqueue("t", {}, max_retries=3)
    [c] = store.claim("w", ["default"], 1)
    store.fail(c.id, c.lease_token, {"type": "E", "message": "x", "traceback": None})
    operator.post(f"/jobs/{job.id}/cancel")
    operator.post(f"/jobs/{job.id}/requeue", {"mode": "continue"})
    assert store.get(job.id).retry_count == 1
    operator.post(f"/jobs/{job.id}/cancel")
    operator.post(f"/jobs/{job.id}/requeue", {"mode": "fresh"})
    assert store.get(job.id).retry_count == 0
    assert operator.post(f"/jobs/{job.id}/requeue", {"mode": "sideways"}).status_code == 400


def test_action_on_a_missing_job_is_404(operator: ConsoleClient) -> None:
    assert operator.post("/jobs/00000000-0000-0000-0000-000000000000/cancel").status_code == 404


def test_actions_are_get_proof(operator: ConsoleClient, store: JobStore) -> None:
    job = store.enqueue("t", {})
    assert operator.get(f"/jobs/{job.id}/cancel").status_code == 405
    assert store.get(job.id).status is S.Queued


def test_bulk_preview_then_confirm_starts_an_operation(operator: ConsoleClient, store: JobStore) -> None:
    done = job_in(store, S.Completed, queue="bulk")
    queued = [store.enqueue("t", {}, queue="bulk").id for _ in range(3)]
    other = store.enqueue("t", {}, queue="elsewhere").id
    form = {"action": "cancel", "queue": "bulk", "status": ""}
    preview = operator.post("/jobs/bulk", form, htmx=True)
    assert preview.status_code == 200
    assert preview.text.lstrip().startswith('<section id="bulk-panel"')
    assert re.search(r"<strong>4</strong> job\(s\) match and can be canceled", preview.text)
    assert "of 4 matching the filter" in preview.text
    assert 'name="typed"' not in preview.text  # small: no count to type
    assert all(store.get(i).status is S.Queued for i in queued)  # a preview changes nothing
    started = operator.post("/jobs/bulk", confirm_form(preview.text, form), htmx=True)
    [op] = store.operations()
    assert started.status_code == 200 and started.headers["HX-Redirect"] == f"/operations/{op.id}"
    assert (op.action, op.filter, op.expected, op.actor) == ("cancel", {"queue": "bulk"}, 4, "operator:ann")
    assert all(store.get(i).status is S.Queued for i in queued)  # runs in the background
    again = operator.post("/jobs/bulk", confirm_form(preview.text, form), htmx=True)
    assert again.headers["HX-Redirect"] == f"/operations/{op.id}" and len(store.operations()) == 1

    bulk.run_pending(store, "test")
    assert all(store.get(i).status is S.Canceled for i in [*queued, done.id])
    assert store.get(other).status is S.Queued
    assert last_event(store, queued[0]).actor == "bulk:ann"  # in its timeline, not the audit log


def test_bulk_by_name_counts_only_eligible_statuses(operator: ConsoleClient, store: JobStore) -> None:
    failed = [job_in(store, S.Failed).id for _ in range(2)]
    store.enqueue("t", {})  # Queued: not retryable
    form = {"action": "retry", "name": "t"}
    preview = operator.post("/jobs/bulk", form)
    assert preview.status_code == 200 and "<html" in preview.text
    assert re.search(r"<strong>2</strong> job\(s\) match and can be retried now", preview.text)
    started = operator.post("/jobs/bulk", confirm_form(preview.text, form))
    [op] = store.operations()
    assert started.status_code == 303 and started.headers["Location"] == f"/operations/{op.id}"
    bulk.run_pending(store, "test")
    assert all(store.get(i).status is S.Queued for i in failed)
    assert store.get_operation(op.id).changed == 2


def test_bulk_by_name_counts_exactly_at_any_size(operator: ConsoleClient, store: JobStore) -> None:
    store.enqueue_many([("t", {"i": i}) for i in range(30)] + [("other", {"i": i}) for i in range(7)])
    store.cancel(store.list_jobs(name="t", limit=1).items[0].id, actor="operator:ann")
    preview = operator.post("/jobs/bulk", {"action": "cancel", "name": "t"}, htmx=True)
    assert re.search(r"<strong>29</strong> job\(s\) match and can be canceled", preview.text)
    assert "of 30 matching the filter" in preview.text


def test_bulk_refuses_an_id_filter_and_a_forged_confirmation(
    operator: ConsoleClient, store: JobStore
) -> None:
    store.enqueue("t", {})
    refused = operator.post("/jobs/bulk", {"action": "cancel", "id": "abc"}, htmx=True)
    # Said in the panel with 200 (a 4xx logs an error in the browser's console).
    assert (
        refused.status_code == 200 and "does not take part of an id: select the rows instead" in refused.text
    )
    bad = operator.post(
        "/jobs/bulk", {"action": "cancel", "confirm": "1", "expected": "1", "operation_id": "a b"}
    )
    assert bad.status_code == 400
    assert store.operations() == []


def test_bulk_with_nothing_eligible_and_bad_action(operator: ConsoleClient, store: JobStore) -> None:
    store.enqueue("t", {})
    html = operator.post("/jobs/bulk", {"action": "retry", "status": "Queued"}, htmx=True).text
    assert "No job matching this filter can be retried now" in html
    assert operator.post("/jobs/bulk", {"action": "explode"}).status_code == 400
    assert operator.post("/jobs/bulk", {"action": "cancel", "status": "Lost"}).status_code == 400


def test_viewer_cannot_bulk_or_recover(viewer: ConsoleClient, store: JobStore) -> None:
    store.enqueue("t", {})
    assert 'id="bulk-panel"' not in viewer.get("/jobs").text
    assert viewer.post("/jobs/bulk", {"action": "cancel", "confirm": "1"}).status_code == 403
    assert viewer.post("/recovery/run").status_code == 403
    assert store.counts().by_status["Queued"] == 1


def test_recover_stuck_jobs(operator: ConsoleClient, store: JobStore) -> None:
    retried = store.enqueue("t", {}, max_retries=1)
    spent = store.enqueue("t", {}, max_retries=0)
    store.claim("w-dead", ["default"], 2)
    expire_leases(store)
    page = operator.get("/recovery").text
    assert 'id="recover-run"' in page
    response = operator.post("/recovery/run", htmx=True)
    assert response.status_code == 200
    assert "Recovery run: 1 retried, 1 failed" in response.text
    assert store.get(retried.id).status is S.Scheduled
    assert store.get(spent.id).status is S.Failed
    assert store.expired_lease_count() == 0
    [run] = store.recovery_runs()
    assert run.trigger == "operator:ann" and run.recovered == 1 and run.failed == 1
    assert last_event(store, retried.id).actor.startswith("recovery:ann#")
    audit = operator.get("/audit?actor=ann").text
    assert "recovery run" in audit and "1 retried, 1 failed" in audit
    assert store.audit() == []  # the run is the one entry, not each job it recovered


def test_recover_without_javascript_redirects(operator: ConsoleClient, store: JobStore) -> None:
    response = operator.post("/recovery/run")
    assert response.status_code == 303 and response.headers["Location"] == "/recovery"
    assert "Recovery run: 0 retried, 0 failed" in operator.get("/recovery").text


def test_recover_while_another_instance_holds_the_lock_is_409(
    operator: ConsoleClient, store: JobStore
) -> None:
    store.enqueue("t", {})
    store.claim("w-dead", ["default"], 1)
    expire_leases(store)
    assert store.acquire_lock(RECOVERY_LOCK, "worker-9", 300)
    response = operator.post("/recovery/run", htmx=True)
    assert response.status_code == 409
    assert "already running" in response.text and "worker-9" in response.text
    assert store.expired_lease_count() == 1
