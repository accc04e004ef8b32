"""Console for control at scale: a bulk operation's page and its
typed-count confirmation, the audit link, attempts and progress on the job
page and jobs list, quiet/stop on the workers page (every store)."""

# ruff: noqa: F811 - the fixtures are imported from console_fixtures and requested by name
from __future__ import annotations

import re

import pytest

from store import bulk
from store.base import JobStore
from store.lifecycle import JobStatus
from store.records import WorkerInfo
from tests.web.console_fixtures import (  # noqa: F401 - fixtures
    ConsoleClient,
    confirm_form,
    console_app,
    operator,
    viewer,
)
from webapp import operations

S = JobStatus
XSS = "<img src=x onerror=alert(1)>"


# ------------------------------------------------------------ operations
def test_operation_page_polls_until_done_and_the_audit_links_to_it(
    operator: ConsoleClient, store: JobStore
) -> None:
    for _ in range(3):
        store.enqueue("t", {}, queue="mail")
    op = bulk.start(store, "cancel", {"queue": "mail"}, "operator:ann", 3)
    page = operator.get(f"/operations/{op.id}")
    assert page.status_code == 200 and "<html" in page.text and "HX-Request" in page.headers["Vary"]
    assert 'hx-trigger="every 1s' in page.text and "waiting for a worker" in page.text
    assert 'role="progressbar"' in page.text and 'aria-valuenow="0"' in page.text
    assert "queue = <code>mail</code>" in page.text

    bulk.run_pending(store, "test")
    fragment = operator.get(f"/operations/{op.id}", htmx=True)
    assert fragment.text.lstrip().startswith('<section id="operation-live"')
    assert "HX-Request" in fragment.headers["Vary"]
    assert "hx-trigger" not in fragment.text  # terminal: the fragment stops polling
    assert 'aria-valuenow="100"' in fragment.text and 'id="op-changed">3<' in fragment.text

    audit = operator.get("/audit").text
    assert len(re.findall(rf'href="/operations/{op.id}"', audit)) == 2  # started and finished
    assert operator.get("/operations/nope").status_code == 404


def test_the_operations_page_lists_them_newest_first_escaped(
    operator: ConsoleClient, viewer: ConsoleClient, store: JobStore
) -> None:
    assert "No bulk operation yet" in operator.get("/operations").text
    store.enqueue("t", {}, queue=XSS)
    first = bulk.start(store, "cancel", {"queue": XSS}, "operator:ann", 1)
    second = bulk.start(store, "delete", {"status": "Canceled"}, "operator:bob", 0)
    bulk.run_pending(store, "test")
    page = viewer.get("/operations")
    assert page.status_code == 200 and XSS not in page.text and "&lt;img src=x" in page.text
    links = re.findall(r'href="/operations/([^"]+)"', page.text)
    assert links == [second.id, first.id]
    assert page.text.count('aria-valuenow="100"') == 2 and "bob" in page.text
    assert 'href="/operations"' in operator.get("/audit").text
    assert 'href="/operations"' in operator.get(f"/operations/{first.id}").text


def test_large_destructive_operation_needs_the_count_typed(
    operator: ConsoleClient, store: JobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(operations, "CONFIRM_ABOVE", 2)
    for _ in range(3):
        store.enqueue("t", {}, queue="big")
    form = {"action": "delete", "queue": "big", "status": "Queued"}
    preview = operator.post("/jobs/bulk", form, htmx=True)
    assert 'name="typed"' in preview.text and "Type <strong>3</strong> to confirm" in preview.text
    wrong = operator.post("/jobs/bulk", {**confirm_form(preview.text, form), "typed": "30"}, htmx=True)
    assert wrong.status_code == 422 and "Type the number of jobs, 3, to confirm" in wrong.text
    missing = operator.post("/jobs/bulk", confirm_form(preview.text, form), htmx=True)
    assert missing.status_code == 422
    assert store.operations() == []
    right = operator.post("/jobs/bulk", {**confirm_form(preview.text, form), "typed": "3"}, htmx=True)
    assert right.status_code == 200 and right.headers["HX-Redirect"].startswith("/operations/")
    small = operator.post("/jobs/bulk", {"action": "retry", "queue": "big"}, htmx=True)
    assert 'name="typed"' not in small.text  # retry is not destructive


def test_viewer_sees_an_operation_but_cannot_start_one(viewer: ConsoleClient, store: JobStore) -> None:
    op = bulk.start(store, "retry", {}, "operator:ann", 0)
    assert viewer.get(f"/operations/{op.id}").status_code == 200
    form = {"action": "cancel", "confirm": "1", "expected": "1", "operation_id": "x1"}
    assert viewer.post("/jobs/bulk", form).status_code == 403
    assert len(store.operations()) == 1


# -------------------------------------------------------- attempts, progress
def test_job_page_lists_attempts_escaped_with_collapsible_tracebacks(
    operator: ConsoleClient, store: JobStore
) -> None:
    job = store.enqueue("t", {}, max_retries=5)
    for n in (1, 2):
        [claimed] = store.claim("w-1", ["default"])
        error = {"type": "ValueError", "message": f"cause {n} {XSS}", "traceback": f"Traceback {n}\n{XSS}"}
        store.fail(job.id, claimed.lease_token, error, worker_id="w-1")
        store.retry_now(job.id)
    html = operator.get(f"/jobs/{job.id}").text
    assert "Failed attempts (2)" in html and XSS not in html
    assert "cause 1 &lt;img" in html and "cause 2 &lt;img" in html
    assert re.search(r"<details hx-disable><summary>Traceback of attempt 1</summary>", html)  # closed
    assert 'id="attempt-1-1" hx-preserve' in html  # kept open across the live fragment's polls


def test_progress_bar_on_the_job_page_and_in_the_list(operator: ConsoleClient, store: JobStore) -> None:
    job = store.enqueue("long", {})
    [claimed] = store.claim("w-1", ["default"])
    store.report_progress(job.id, claimed.lease_token, 0.42, f"step 42 {XSS}")
    live = operator.get(f"/jobs/{job.id}", htmx=True).text
    assert 'id="job-progress"' in live and 'aria-valuenow="42"' in live
    assert "step 42 &lt;img" in live and XSS not in live
    listed = operator.get("/jobs?status=InProgress").text
    assert 'role="progressbar"' in listed and 'aria-valuenow="42"' in listed


# ---------------------------------------------------------------- workers
def _register(store: JobStore, worker_id: str = "w-ctl") -> None:
    store.worker_heartbeat(WorkerInfo(worker_id, "host", 4242, ["default"], 2))


def test_quiet_then_stop_from_the_workers_page(operator: ConsoleClient, store: JobStore) -> None:
    _register(store)
    page = operator.get("/workers").text
    assert 'data-quiet="w-ctl"' in page and 'data-stop="w-ctl"' in page
    quiet = operator.post("/workers/w-ctl/quiet", htmx=True)
    assert quiet.status_code == 200 and "quiet (by ann)" in quiet.text
    assert 'data-quiet="w-ctl"' not in quiet.text and 'data-stop="w-ctl"' in quiet.text
    [info] = store.workers()
    assert (info.command, info.command_by) == ("quiet", "operator:ann")
    stop = operator.post("/workers/w-ctl/stop")
    assert stop.status_code == 303
    assert "stopping (by ann)" in operator.get("/workers").text
    assert operator.post("/workers/nobody/stop").status_code == 404
    assert operator.post("/workers/w-ctl/explode").status_code in (404, 405)


def test_a_quiet_worker_can_be_resumed_from_the_workers_page(
    operator: ConsoleClient, store: JobStore
) -> None:
    _register(store)
    assert 'data-unquiet="w-ctl"' not in operator.get("/workers").text  # only a quiet worker resumes
    operator.post("/workers/w-ctl/quiet", htmx=True)
    page = operator.get("/workers").text
    assert 'data-unquiet="w-ctl"' in page
    assert operator.post("/workers/w-ctl/unquiet", csrf=False).status_code == 400
    assert store.workers()[0].command == "quiet"
    resumed = operator.post("/workers/w-ctl/unquiet", htmx=True)
    assert resumed.status_code == 200 and "claims jobs again" in resumed.text
    assert 'data-quiet="w-ctl"' in resumed.text and 'data-unquiet="w-ctl"' not in resumed.text
    assert (store.workers()[0].command, store.workers()[0].command_by) == (None, None)
    stopped = operator.post("/workers/w-ctl/stop", htmx=True)
    assert "is not replaced" in stopped.text  # says what a stop does under a supervisor
    assert operator.post("/workers/w-ctl/unquiet").status_code == 409


def test_viewer_cannot_command_workers_and_csrf_is_needed(
    viewer: ConsoleClient, operator: ConsoleClient, store: JobStore
) -> None:
    _register(store)
    assert 'data-quiet="w-ctl"' not in viewer.get("/workers").text
    assert viewer.post("/workers/w-ctl/quiet").status_code == 403
    assert operator.post("/workers/w-ctl/stop", csrf=False).status_code == 400
    assert store.workers()[0].command is None
