"""Console for operating over months: queue pause/resume and page, delete
(one and bulk), "queue paused by", periodic page, retention section, forgetting
a silent worker, queue events in the audit log (every store)."""

# ruff: noqa: F811 - the fixtures are imported from console_fixtures and requested by name
from __future__ import annotations

import re
import uuid

import pytest
from flask import Flask

from store import bulk, bulk_select
from store.base import JobStore
from store.errors import JobNotFound
from store.lifecycle import EventKind, JobStatus
from store.models import MaintenanceRun, Schedule, WorkerInfo, ts
from tests.store.helpers import job_in
from tests.web.console_fixtures import (  # noqa: F401 - fixtures
    ConsoleClient,
    confirm_form,
    console_app,
    operator,
    viewer,
)

S = JobStatus
XSS = "<img src=x onerror=alert(1)>"


# ------------------------------------------------------------------ queues
def test_overview_marks_paused_queues_and_pauses_from_the_row(
    operator: ConsoleClient, store: JobStore
) -> None:
    store.enqueue("t", None, queue="mail")
    html = operator.get("/").text
    assert 'data-queue-action="pause"' in html and "q-paused" not in html
    response = operator.post("/queues/mail/pause", {"next": "/"})
    assert response.status_code == 303 and response.headers["Location"] == "/"
    [state] = store.queue_states()
    assert (state.paused, state.changed_by) == (True, "operator:ann")
    html = operator.get("/").text
    assert "q-paused" in html and "paused by ann" in html and 'data-queue-action="resume"' in html
    assert operator.post("/queues/mail/resume", {"next": "//evil.example/"}).headers["Location"] == "/"
    assert store.queue_states()[0].paused is False


def test_queue_page_shows_counts_state_and_toggles_with_htmx(
    operator: ConsoleClient, store: JobStore
) -> None:
    for _ in range(3):
        store.enqueue("t", None, queue="reports")
    page = operator.get("/queues/reports")
    assert page.status_code == 200 and 'id="queue-state"' in page.text and ">running<" in page.text
    assert re.search(r"Queued</span>\s*<span class=\"card-value\">3<", page.text)
    fragment = operator.post("/queues/reports/pause", htmx=True)
    assert fragment.status_code == 200
    assert fragment.text.lstrip().startswith('<div id="queue-live"')
    assert "paused" in fragment.text and "by <strong>ann</strong>" in fragment.text
    assert "Queue reports paused by ann." in fragment.text
    assert "Resume queue" in operator.get("/queues/reports", htmx=True).text


def test_queue_names_are_escaped_and_may_hold_slashes(operator: ConsoleClient, store: JobStore) -> None:
    store.enqueue("t", None, queue=f"a/{XSS}")
    operator.post(f"/queues/a/{XSS}/pause")
    html = operator.get("/").text + operator.get(f"/queues/a/{XSS}").text
    assert XSS not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert store.queue_states()[0].name == f"a/{XSS}"


def test_viewer_sees_but_cannot_pause(viewer: ConsoleClient, store: JobStore) -> None:
    store.enqueue("t", None, queue="mail")
    assert "data-queue-action" not in viewer.get("/").text
    assert "queue-toggle" not in viewer.get("/queues/mail").text
    assert viewer.post("/queues/mail/pause").status_code == 403
    assert store.queue_states() == []


def test_pause_needs_csrf(operator: ConsoleClient, store: JobStore) -> None:
    assert operator.post("/queues/mail/pause", csrf=False).status_code == 400
    assert store.queue_states() == []


def test_a_waiting_job_of_a_paused_queue_says_who_paused_it(operator: ConsoleClient, store: JobStore) -> None:
    job = store.enqueue("t", None, queue="mail")
    state = store.pause_queue("mail", actor="operator:ann")
    html = operator.get(f"/jobs/{job.id}").text
    at = state.changed_at.strftime("%H:%M")
    assert f"Queue &#39;mail&#39; paused by ann at {at} UTC" in html
    store.resume_queue("mail", actor="operator:ann")
    assert "paused by" not in operator.get(f"/jobs/{job.id}").text


# ------------------------------------------------------------------ delete
def test_delete_a_job_from_its_page(operator: ConsoleClient, store: JobStore) -> None:
    job = job_in(store, S.Failed, queue="q1")
    assert 'id="act-delete"' in operator.get(f"/jobs/{job.id}").text
    response = operator.post(f"/jobs/{job.id}/delete", htmx=True)
    assert response.status_code == 200 and response.headers["HX-Redirect"] == "/jobs?queue=q1"
    with pytest.raises(JobNotFound):
        store.get(job.id)
    assert "Deleted job" in operator.get("/jobs?queue=q1").text
    assert operator.post(f"/jobs/{job.id}/delete").status_code == 404


def test_a_running_job_has_no_delete_and_is_refused(operator: ConsoleClient, store: JobStore) -> None:
    job = job_in(store, S.InProgress)
    assert 'id="act-delete"' not in operator.get(f"/jobs/{job.id}").text
    response = operator.post(f"/jobs/{job.id}/delete", htmx=True)
    assert response.status_code == 409 and "cannot be deleted (cancel it first)" in response.text
    assert store.get(job.id).status is S.InProgress


def test_viewer_cannot_delete(viewer: ConsoleClient, store: JobStore) -> None:
    job = store.enqueue("t")
    assert 'id="act-delete"' not in viewer.get(f"/jobs/{job.id}").text
    assert viewer.post(f"/jobs/{job.id}/delete").status_code == 403
    assert store.get(job.id).status is S.Queued


def test_bulk_delete_with_count_preview(operator: ConsoleClient, store: JobStore) -> None:
    done = [job_in(store, S.Completed, queue="bulk").id for _ in range(2)]
    running = job_in(store, S.InProgress, queue="bulk").id
    keep = store.enqueue("t", {}, queue="other").id
    form = {"action": "delete", "queue": "bulk"}
    preview = operator.post("/jobs/bulk", form, htmx=True)
    assert re.search(r"<strong>2</strong> job\(s\) match and can be deleted", preview.text)
    assert "of 3 matching the filter" in preview.text
    operator.post("/jobs/bulk", confirm_form(preview.text, form), htmx=True)
    bulk.run_pending(store, "test")
    assert store.operations()[0].changed == 2
    for job_id in done:
        with pytest.raises(JobNotFound):
            store.get(job_id)
    assert store.get(running).status is S.InProgress and store.get(keep).status is S.Queued
    # One audit entry at the start and one at the end, none a job.
    assert [e.kind for e in store.audit()] == [EventKind.BULK_FINISHED, EventKind.BULK_STARTED]


def test_bulk_preview_of_a_search_past_its_window_says_it_is_a_lower_bound(
    operator: ConsoleClient, store: JobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk_select, "PREVIEW_SCAN_LIMIT", 3)
    for i in range(5):
        store.enqueue("t", {"kind": "odd", "i": i}, queue="win")
    form = {"action": "cancel", "queue": "win", "payload": "kind=odd"}
    preview = operator.post("/jobs/bulk", form, htmx=True)
    assert "Counted in the 3 newest jobs this search reads" in preview.text
    assert re.search(r"At least <strong>3</strong> job\(s\) match and can be canceled", preview.text)
    operator.post("/jobs/bulk", confirm_form(preview.text, form), htmx=True)
    bulk.run_pending(store, "test")
    assert store.operations()[0].changed == 5  # every match, not only the counted window
    whole = operator.post("/jobs/bulk", {"action": "delete", "queue": "win"}, htmx=True)
    assert "newest jobs this search reads" not in whole.text  # a listing filter is counted exactly


# ------------------------------------------------------------------- audit
def test_audit_renders_queue_events_and_deletions(operator: ConsoleClient, store: JobStore) -> None:
    job = store.enqueue("t")
    operator.post("/queues/mail/pause")
    operator.post(f"/jobs/{job.id}/delete")
    html = operator.get("/audit").text
    assert "queue_paused" in html and 'href="/queues/mail">queue mail</a>' in html
    assert 'href="/jobs/"' not in html  # no link to a job with an empty id
    assert "(deleted)" in html and f'href="/jobs/{job.id}"' not in html


# ---------------------------------------------------------------- periodic
@pytest.fixture
def schedules(store: JobStore) -> JobStore:
    store.save_schedules(
        [
            Schedule("nightly", "report", "0 3 * * *", "Europe/Paris", "reports", {"full": True}),
            Schedule(f"x{XSS}", "ping", "*/5 * * * *"),
        ]
    )
    return store


def test_periodic_page_lists_schedules_with_a_countdown(operator: ConsoleClient, schedules: JobStore) -> None:
    html = operator.get("/periodic").text
    assert "At 03:00, every day" in html and "Europe/Paris" in html
    assert re.search(r'class="countdown next-run" data-countdown="\d+\.\d"', html)
    assert XSS not in html and "never" in html


def test_periodic_enable_disable_and_enqueue_now(operator: ConsoleClient, schedules: JobStore) -> None:
    off = operator.post("/periodic/nightly/disable", htmx=True)
    assert off.status_code == 200 and "Schedule nightly disabled by ann." in off.text
    assert {s.name: s.enabled for s in schedules.schedules()}["nightly"] is False
    operator.post("/periodic/nightly/enable")
    assert {s.name: s.enabled for s in schedules.schedules()}["nightly"] is True
    run = operator.post("/periodic/nightly/run", {"nonce": uuid.uuid4().hex}, htmx=True)
    assert run.status_code == 200 and "Enqueued report now" in run.text
    [job] = schedules.list_jobs(queue="reports").items
    assert (job.name, job.payload) == ("report", {"full": True})
    schedules.record_tick("nightly", schedules.now(), job.id)
    html = operator.get("/periodic").text
    assert f'href="/jobs/{job.id}"' in html and ">Queued<" in html
    assert operator.post("/periodic/nope/run", {"nonce": uuid.uuid4().hex}).status_code == 404
    assert operator.post("/periodic/nightly/run").status_code == 400  # no nonce
    assert operator.post("/periodic/nope/enable").status_code == 404


def test_viewer_sees_periodic_but_cannot_act(viewer: ConsoleClient, schedules: JobStore) -> None:
    html = viewer.get("/periodic").text
    assert "At 03:00, every day" in html and "periodic_run" not in html and '/run"' not in html
    assert viewer.post("/periodic/nightly/run").status_code == 403
    assert viewer.post("/periodic/nightly/disable").status_code == 403


# --------------------------------------------------------- retention, workers
def test_recovery_page_shows_retention_and_last_pruning(operator: ConsoleClient, store: JobStore) -> None:
    html = operator.get("/recovery").text
    assert "kept 7.0 d" in html and "kept 30.0 d" in html and "none recorded yet" in html
    at = ts(store.now())
    store.record_maintenance_run(MaintenanceRun("r1", "retention", at, at, "maint@h:1", 1234, 80.0, 12.0))
    html = operator.get("/recovery", htmx=True).text
    assert "1,234 job(s) pruned" in html and "longest batch 12 ms" in html


def test_retention_zero_keeps_forever(console_app: Flask, operator: ConsoleClient) -> None:
    console_app.extensions["leasehold.settings"] = _with(console_app, {S.Canceled: 0.0})
    assert "kept forever" in operator.get("/recovery").text


def _with(app: Flask, retention: dict) -> object:
    from dataclasses import replace

    cfg = app.extensions["leasehold.settings"]
    return replace(cfg, retention_s={**cfg.retention_s, **retention})


def _worker(worker_id: str) -> WorkerInfo:
    return WorkerInfo(worker_id, "host", 1, ["default"], 1, [], None, None)


def test_forget_a_silent_worker(operator: ConsoleClient, store: JobStore) -> None:
    store.worker_heartbeat(_worker("old"))
    store.clock_offset_s += 3600
    store.worker_heartbeat(_worker("live"))
    html = operator.get("/workers").text
    assert 'data-forget="old"' in html and 'data-forget="live"' not in html
    assert operator.post("/workers/live/forget").status_code == 409
    assert operator.post("/workers/nope/forget").status_code == 404
    response = operator.post("/workers/old/forget")
    assert response.status_code == 303
    assert [w.id for w in store.workers()] == ["live"]


def test_viewer_cannot_forget(viewer: ConsoleClient, store: JobStore) -> None:
    store.worker_heartbeat(_worker("old"))
    store.clock_offset_s += 3600
    assert "data-forget" not in viewer.get("/workers").text
    assert viewer.post("/workers/old/forget").status_code == 403
    assert [w.id for w in store.workers()] == ["old"]
