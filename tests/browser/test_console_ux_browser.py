"""The console as an operator lives in it: focus and scroll kept across live
refreshes (htmx morph swaps), confirmations before destructive actions, the
favicon, and what the phone layout shows. Each test reproduces a defect seen
in the browser."""

from __future__ import annotations

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from store.lifecycle import JobStatus
from store.models import WorkerInfo
from tests.browser.helpers import LiveServer, Watched, log_in
from tests.store.helpers import job_in

S = JobStatus


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


def _refreshed(page: Page, selector: str, times: int = 2) -> None:
    """Wait until the polled fragment ``selector`` has been swapped ``times`` times."""
    page.evaluate(
        """(sel) => { window.__swaps = 0;
        document.addEventListener("htmx:afterSwap", (e) => {
            if (e.detail.target && e.detail.target.matches(sel)) window.__swaps += 1; }); }""",
        selector,
    )
    page.wait_for_function(f"() => window.__swaps >= {times}")


def test_focus_and_scroll_survive_the_live_refresh(page: Page, live_server: LiveServer) -> None:
    store = live_server.handle.store
    store.worker_heartbeat(WorkerInfo("w-focus", "host", 1, ["default"], 2, []))
    for q in ("default", "mail", "reports"):
        store.enqueue("noop", {}, queue=q)
    page.set_viewport_size({"width": 1280, "height": 500})
    log_in(page, live_server, "ann", "/workers")
    quiet = page.locator("[data-quiet='w-focus']")
    quiet.focus()
    _refreshed(page, "#workers-table")
    assert page.evaluate("document.activeElement.dataset.quiet") == "w-focus"

    page.goto(f"{live_server.url}/")
    pause = page.locator("[data-queue-action='pause']").first
    pause.scroll_into_view_if_needed()
    pause.focus()
    before = page.evaluate("window.scrollY")
    assert before > 0
    _refreshed(page, "#overview-live")
    assert page.evaluate("document.activeElement.dataset.queueAction") == "pause"
    assert page.evaluate("window.scrollY") == before


def test_destructive_actions_ask_first(page: Page, live_server: LiveServer) -> None:
    store = live_server.handle.store
    store.enqueue("noop", {}, queue="mail")
    store.worker_heartbeat(WorkerInfo("w-stop", "host", 1, ["default"], 2, []))
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    log_in(page, live_server, "ann", "/")
    page.click("[data-queue-action='pause']")
    expect(page.locator("[data-queue-action='pause']")).to_be_visible()
    assert dialogs and "Pause queue mail" in dialogs[-1]
    assert not store.queue_states() or not any(q.paused for q in store.queue_states())

    page.goto(f"{live_server.url}/workers")
    page.click("[data-stop='w-stop']")
    assert "Stop worker w-stop" in dialogs[-1]
    assert store.workers()[0].command is None

    # Cancel on a finished job says what it means, and asks first.
    for status, kept in ((S.Completed, "result"), (S.Failed, "error")):
        done = job_in(store, status)
        page.goto(f"{live_server.url}/jobs/{done.id}")
        expect(page.locator("#act-cancel")).to_have_text("Mark canceled")
        expect(page.locator("#cancel-finished-hint")).to_contain_text(
            f"stops nothing; it only files the job as Canceled (its {kept} is kept)"
        )
        page.click("#act-cancel")
        assert f"Mark this {status.name} job Canceled? Nothing runs or stops" in dialogs[-1]
        assert store.get(done.id).status is status


def test_favicon_is_served(page: Page, live_server: LiveServer) -> None:
    watched = Watched(page)
    failed: list[str] = []
    page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
    log_in(page, live_server, "ann", "/")
    page.wait_for_load_state("networkidle")
    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert icon and page.request.get(live_server.url + icon).ok
    assert page.request.get(f"{live_server.url}/favicon.ico").ok
    assert failed == []
    assert watched.errors == []
