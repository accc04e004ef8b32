"""Flow control in a real browser: an operator sets a queue's limit from its
page and the job page says which limit holds a job; a batch's page follows
its progress live to its callback, run by a real worker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from store.flow_rules import QueueLimits
from store.models import JobSpec
from tests.browser.helpers import LiveServer, Watched, log_in, screenshot
from tests.workers.procs import Spawner


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


@pytest.fixture
def spawner(live_server: LiveServer, tmp_path: Path) -> Iterator[Spawner]:
    spawn = Spawner(live_server.handle.url, tmp_path)
    yield spawn
    spawn.cleanup()


def test_set_a_queue_limit_and_see_why_a_job_waits(page: Page, live_server: LiveServer) -> None:
    store = live_server.handle.store
    jobs = [store.enqueue("noop", {"n": n}, queue="mail") for n in range(3)]
    watched = Watched(page)
    log_in(page, live_server, "ann", "/queues/mail")
    expect(page.locator("#no-limits")).to_be_visible()
    page.click("#limits-editor summary")
    page.fill("#limit-input-concurrency", "1")
    page.fill("#limit-input-rate", "100/1")
    page.click("#limits-save")
    expect(page.locator(".flash.ok").first).to_contain_text("Limits of mail set by ann.")
    expect(page.locator("#limit-concurrency")).to_contain_text("1 running")
    assert store.queue_limits() == {
        "mail": QueueLimits(concurrency=1, rate=store.queue_limits()["mail"].rate)
    }
    assert store.audit(1)[0].actor == "operator:ann"

    [running] = store.claim("w-browser", ["mail"], 10)  # the limit holds the other two
    waiting = next(j for j in jobs if j.id != running.id)
    page.goto(f"{live_server.url}/jobs/{waiting.id}")
    expect(page.locator(".why")).to_contain_text("concurrency limit 1: 1 running")
    screenshot(page, "job-held-by-limit")
    page.goto(f"{live_server.url}/queues/mail")
    expect(page.locator("#limit-concurrency")).to_contain_text("1")

    # A bad value is refused with the field named, nothing changed.
    page.click("#limits-editor summary")
    page.fill("#limit-input-concurrency", "zero")
    page.click("#limits-save")
    expect(page.locator(".flash").first).to_contain_text("concurrency")
    assert store.queue_limits()["mail"].concurrency == 1
    assert watched.csp_violations() == []


def test_follow_a_batch_to_its_callback(page: Page, live_server: LiveServer, spawner: Spawner) -> None:
    store = live_server.handle.store
    batch = store.create_batch(
        [JobSpec("noop", {"n": n}) for n in range(20)], JobSpec("noop", {"callback": True})
    )
    watched = Watched(page)
    log_in(page, live_server, "ann", f"/batches/{batch.id}")
    expect(page.locator("#batch-progress")).to_contain_text("0 of 20 finished")
    expect(page.locator("#batch-callback-status")).to_have_text("Scheduled")
    page.evaluate("window.__noReload = 'still here'")
    spawner.worker("--concurrency", "4", name="browser-batch")
    expect(page.locator("#batch-state")).to_have_text("finished", timeout=60_000)
    expect(page.locator("#batch-progress")).to_contain_text("20 of 20 finished")
    expect(page.locator("#batch-callback-status")).to_have_text("Completed", timeout=60_000)
    assert page.evaluate("window.__noReload") == "still here", "the page reloaded"
    assert page.locator("#batch-live").get_attribute("hx-trigger") is None  # polling stopped
    screenshot(page, "batch-finished")
    page.click("#batch-callback a")
    expect(page.locator("#job-parents li")).to_have_count(20)
    assert watched.csp_violations() == []


def test_cancel_a_batch_from_its_page(page: Page, live_server: LiveServer) -> None:
    store = live_server.handle.store
    batch = store.create_batch([JobSpec("noop", {"n": n}) for n in range(5)], JobSpec("noop", None))
    log_in(page, live_server, "ann", f"/batches/{batch.id}")
    page.once("dialog", lambda d: d.accept())
    page.click("#batch-cancel")
    expect(page.locator("#batch-state")).to_have_text("finished")
    expect(page.locator("#batch-live")).to_contain_text("Batch canceled by ann.")
    expect(page.locator("#batch-callback-status")).to_have_text("Canceled")
    assert store.get_batch(batch.id).counts == {"Canceled": 5}
