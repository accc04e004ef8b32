"""Control at scale in a real browser: a bulk operation on 5,000
jobs shows its progress and finishes; a handler's progress bar moves on the
job page; a worker is quieted from the console and stops claiming until it
is resumed.
Screenshots go to test-artifacts/screenshots/."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from store import bulk
from store.base import JobStore
from store.models import JobSpec
from tests.browser.helpers import LiveServer, Watched, log_in, screenshot
from tests.workers.procs import job_is, wait_until
from tests.workers.test_worker_inprocess import make_worker, running
from workers.exits import EXIT_STOPPED

BULK_JOBS = 5_000


def _seen_values(page: Page, selector: str, until: Callable[[], bool], timeout_s: float = 60) -> set[int]:
    """Every aria-valuenow the bar at ``selector`` shows until ``until()``,
    the last read after ``until()`` held (so the final value is among them)."""
    seen: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = until()
        bar = page.locator(selector)
        if bar.count():
            try:
                value = bar.get_attribute("aria-valuenow", timeout=1_000)
            except PlaywrightTimeoutError:  # swapped out by a refresh between count() and the read
                value = None
            if value is not None:
                seen.add(int(value))
        if done:
            return seen
        page.wait_for_timeout(100)
    raise AssertionError(f"timed out; the bar showed {sorted(seen)}")


def _drive(store: JobStore, operation_id: str, stop: threading.Event) -> None:
    """The worker's maintenance task, slowed down: one batch of 250 every 0.2 s."""
    while not stop.is_set():
        operation = store.get_operation(operation_id)
        if operation is None or operation.finished:
            return
        bulk.run_batch(store, operation, batch=250)
        stop.wait(0.2)


@pytest.mark.slow
def test_a_bulk_cancel_of_5000_jobs_shows_progress_and_finishes(
    context: BrowserContext, live_server: LiveServer
) -> None:
    store = live_server.handle.store
    store.enqueue_many([JobSpec("mail", {"i": i}, queue="bulk") for i in range(BULK_JOBS)])
    store.enqueue("mail", {"keep": True}, queue="other")
    page = context.new_page()
    watched = Watched(page)
    log_in(page, live_server, "ann", "/jobs")
    page.goto(f"{live_server.url}/jobs?queue=bulk&status=Queued")

    page.select_option("#bulk-every select[name=action]", "cancel")
    page.click("#bulk-preview")
    expect(page.locator("#bulk-panel")).to_contain_text("5,000 job(s) match and can be canceled")
    page.fill("#bulk-typed", "500")  # a slip: refused, nothing started
    page.click("#bulk-confirm")
    expect(page.locator("#bulk-error")).to_contain_text("Type the number of jobs, 5,000")
    assert store.operations() == []
    page.fill("#bulk-typed", "5000")
    page.click("#bulk-confirm")
    page.wait_for_url(f"{live_server.url}/operations/*")
    [operation] = store.operations()
    expect(page.locator("#op-state")).to_have_text("waiting for a worker")
    expect(page.locator("#op-expected")).to_have_text("5,000")

    stop = threading.Event()
    driver = threading.Thread(target=_drive, args=(store, operation.id, stop), daemon=True)
    driver.start()
    try:
        seen = _seen_values(page, "#op-progress", lambda: page.locator("#op-state").inner_text() == "done")
    finally:
        stop.set()
        driver.join(60)
    assert 100 in seen and any(0 < v < 100 for v in seen), seen  # seen moving, not only at the end
    expect(page.locator("#op-changed")).to_have_text("5,000")
    expect(page.locator("#operation-live")).not_to_have_attribute("hx-trigger", "every 1s, lh:refresh")
    screenshot(page, "bulk-operation-done")
    counts = store.counts().by_queue
    assert counts["bulk"].get("Canceled") == BULK_JOBS and counts["other"].get("Queued") == 1

    page.goto(f"{live_server.url}/audit")
    links = page.locator(f'a[data-operation="{operation.id}"]')
    # The outcome is the newest entry; the start lies under the 5,000 cancellations
    # (the audit page shows the newest 200 entries).
    expect(links.first).to_contain_text("operation")
    expect(page.locator("#audit-table tbody tr").first).to_contain_text("bulk_finished")
    links.first.click()
    page.wait_for_url(f"{live_server.url}/operations/{operation.id}")
    assert watched.csp_violations() == []


@pytest.mark.slow
def test_a_handlers_progress_bar_moves(context: BrowserContext, live_server: LiveServer) -> None:
    handle = live_server.handle
    store = handle.store
    # Each step shows for 2.5 s less the worker's flush delay (<= 0.5 s): at least
    # one of the page's polls (every 2 s) sees each one.
    job = store.enqueue("stepwise", {"steps": 4, "step_s": 2.5})
    page = context.new_page()
    watched = Watched(page)
    log_in(page, live_server, "ann", f"/jobs/{job.id}")
    with running(make_worker(handle, concurrency=1, name="w-progress")):
        expect(page.locator("#job-progress")).to_be_visible()
        screenshot(page, "job-progress")
        seen = _seen_values(page, "#job-progress", lambda: job_is(store, job.id, "Completed"))
    expect(page.locator("#job-status")).to_have_text("Completed")
    assert len({v for v in seen if 0 < v < 100}) >= 2, seen  # the bar moved while it ran
    assert watched.csp_violations() == []


@pytest.mark.slow
def test_a_worker_quieted_from_the_console_stops_claiming_until_resumed(
    context: BrowserContext, live_server: LiveServer
) -> None:
    handle = live_server.handle
    store = handle.store
    worker = make_worker(handle, concurrency=1, name="w-browser")
    first = store.enqueue("noop")
    page = context.new_page()
    watched = Watched(page)
    with running(worker, EXIT_STOPPED):
        wait_until(lambda: job_is(store, first.id, "Completed"), timeout=30, what="the first job")
        log_in(page, live_server, "ann", "/workers")
        page.click('button[data-quiet="w-browser"]')
        expect(page.locator("#workers-table")).to_contain_text("quiet (by ann)")
        expect(page.locator('button[data-quiet="w-browser"]')).to_have_count(0)
        screenshot(page, "worker-quiet")
        wait_until(lambda: worker._quiet.is_set(), timeout=30, what="the worker to take the command")
        later = store.enqueue("noop")
        beats = worker.heartbeat.interval_s() * 2 if worker.heartbeat else 1.0
        with pytest.raises(AssertionError):
            wait_until(lambda: not job_is(store, later.id, "Queued"), timeout=beats + 0.5, what="a claim")

        page.click('button[data-unquiet="w-browser"]')
        expect(page.locator("p.flash")).to_contain_text("claims jobs again")
        expect(page.locator('button[data-quiet="w-browser"]')).to_have_count(1)
        wait_until(lambda: job_is(store, later.id, "Completed"), timeout=30, what="claims to resume")

        page.once("dialog", lambda d: d.accept())  # permanent under the supervisor: asks first
        page.click('button[data-stop="w-browser"]')  # a plain form post (the table is hx-disable)
        expect(page.locator("#workers-table")).to_contain_text("stopping (by ann)")
        wait_until(lambda: worker._stopping.is_set(), timeout=30, what="the worker to stop")
    assert watched.csp_violations() == []
