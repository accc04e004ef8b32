"""The console in a real browser: live updates with a real worker, actions,
recovery, roles, and inert job data. Screenshots go to test-artifacts/screenshots/."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from store.lifecycle import JobStatus
from store.models import WorkerInfo
from tests.browser.helpers import WAIT_MS, LiveServer, Watched, log_in, screenshot
from tests.store.helpers import job_in
from tests.workers.procs import Spawner

S = JobStatus
XSS_URL_MARK = "xss-probe"
XSS = {
    "img": f"<img src=/{XSS_URL_MARK}-img onerror=alert(1)>",
    "htmx": f'<div hx-get="/{XSS_URL_MARK}-htmx" hx-trigger="load">htmx</div>',
    "script": "<script>alert(2)</script>",
    "on": '<a href="#" hx-on:htmx:load="alert(3)">x</a>',
}


@pytest.fixture
def spawner(live_server: LiveServer, tmp_path: Path) -> Iterator[Spawner]:
    spawn = Spawner(live_server.handle.url, tmp_path)
    yield spawn
    spawn.cleanup()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


def status_badge(page: Page):
    return page.locator("#job-status")


def test_job_goes_queued_in_progress_completed_live_with_a_real_worker(
    page: Page, live_server: LiveServer, spawner: Spawner, tmp_path: Path
) -> None:
    store = live_server.handle.store
    release = tmp_path / "release"
    job = store.enqueue("hold", {"path": str(release)})
    watched = Watched(page)
    log_in(page, live_server, "ann", f"/jobs/{job.id}")
    expect(status_badge(page)).to_have_text("Queued")
    page.evaluate("window.__noReload = 'still here'")
    navigations: list[str] = []
    page.on("framenavigated", lambda f: navigations.append(f.url) if f == page.main_frame else None)

    worker = spawner.worker("--concurrency", "2", name="browser-w1")
    expect(status_badge(page)).to_have_text("InProgress", timeout=60_000)
    expect(page.locator("#lease-left")).to_be_visible()
    expect(page.locator(".why")).to_contain_text("Running on browser-w1")
    screenshot(page, "job-running")
    release.touch()
    expect(status_badge(page)).to_have_text("Completed", timeout=60_000)
    expect(page.locator("#job-live")).to_contain_text('"worker": "browser-w1"')
    assert page.evaluate("window.__noReload") == "still here", "the page reloaded"
    assert navigations == []
    # a terminal status stops the polling: the fragment has no trigger any more
    assert page.locator("#job-live").get_attribute("hx-trigger") is None
    assert watched.csp_violations() == []
    screenshot(page, "job-completed")

    # cancel a running job from the page; the worker sees its lease revoked
    running = store.enqueue("wait_cancel", {"seconds": 60})
    page.goto(f"{live_server.url}/jobs/{running.id}")
    expect(status_badge(page)).to_have_text("InProgress", timeout=60_000)
    page.once("dialog", lambda d: d.accept())
    page.click("#act-cancel")
    expect(status_badge(page)).to_have_text("Canceled")
    expect(page.locator("#job-live")).to_contain_text("Canceled by ann.")
    expect(page.locator("#job-live")).to_contain_text("operator:ann")
    assert worker.alive(), worker.log()


def test_cancel_and_requeue_without_a_worker(page: Page, live_server: LiveServer) -> None:
    store = live_server.handle.store
    queued = store.enqueue("noop", {})
    failed = job_in(store, S.Failed, queue="other")
    log_in(page, live_server, "ann", f"/jobs/{queued.id}")
    page.once("dialog", lambda d: d.accept())
    page.click("#act-cancel")
    expect(status_badge(page)).to_have_text("Canceled")
    assert store.get(queued.id).status is S.Canceled

    page.goto(f"{live_server.url}/jobs/{failed.id}")
    expect(status_badge(page)).to_have_text("Failed")
    page.click("#act-requeue-fresh")
    expect(status_badge(page)).to_have_text("Queued")
    expect(page.locator("#job-live")).to_contain_text("Requeued by ann.")
    expect(page.locator(".why")).to_contain_text("No live worker")
    assert store.get(failed.id).status is S.Queued


def test_an_action_the_status_no_longer_allows_shows_a_message_in_place(
    page: Page, live_server: LiveServer
) -> None:
    store = live_server.handle.store
    failed = job_in(store, S.Failed)
    log_in(page, live_server, "ann", f"/jobs/{failed.id}")
    expect(status_badge(page)).to_have_text("Failed")  # terminal: this page does not poll
    store.retry_now(failed.id, actor="operator:bob")  # someone else acts meanwhile
    page.click("#act-requeue-fresh")
    expect(page.locator("#job-live .flash.bad")).to_contain_text(
        "This job is Queued now and cannot be requeued"
    )
    expect(status_badge(page)).to_have_text("Queued")


def test_recovery_preview_and_run_after_a_lease_expires(page: Page, live_server: LiveServer) -> None:
    store = live_server.handle.store
    job = store.enqueue("noop", {}, max_retries=2)
    [claimed] = store.claim("w-gone", ["default"], 1, lease_ttl_s=1)  # and never heartbeats
    assert claimed.id == job.id
    log_in(page, live_server, "ann", "/recovery")
    # the page polls: the expired lease shows up in the preview by itself
    preview = page.locator("#recovery-live table").first
    expect(preview).to_contain_text(job.id[-8:], timeout=WAIT_MS)
    expect(preview).to_contain_text("retry")
    screenshot(page, "recovery-preview")
    page.click("#recover-run")
    expect(page.locator("#recovery-live")).to_contain_text("Recovery run: 1 retried, 0 failed")
    expect(page.locator("#recovery-live")).to_contain_text("operator:ann")
    assert store.get(job.id).status is S.Scheduled
    page.goto(f"{live_server.url}/audit")
    expect(page.locator("#audit-table")).to_contain_text("recovery run")
    screenshot(page, "audit-after-recovery")


def test_viewer_sees_no_buttons_and_a_forced_post_is_refused(
    page: Page, context: BrowserContext, live_server: LiveServer
) -> None:
    store = live_server.handle.store
    failed = job_in(store, S.Failed)
    log_in(page, live_server, "vic", f"/jobs/{failed.id}")
    expect(status_badge(page)).to_have_text("Failed")
    assert page.locator("#job-live button").count() == 0
    page.goto(f"{live_server.url}/recovery")
    assert page.locator("#recover-run").count() == 0
    page.goto(f"{live_server.url}/jobs")
    assert page.locator("#bulk-panel").count() == 0
    headers = page.locator("body").get_attribute("hx-headers") or ""
    token = re.search(r'"X-CSRFToken": "([^"]+)"', headers)
    assert token
    forced = context.request.post(
        f"{live_server.url}/jobs/{failed.id}/requeue",
        form={"mode": "fresh", "csrf_token": token.group(1)},
        max_redirects=0,
    )
    assert forced.status == 403
    no_token = context.request.post(f"{live_server.url}/jobs/{failed.id}/retry", max_redirects=0)
    assert no_token.status == 400
    assert store.get(failed.id).status is S.Failed


def test_xss_in_job_data_stays_inert(page: Page, live_server: LiveServer) -> None:
    store = live_server.handle.store
    job = store.enqueue(XSS["img"], XSS, queue="q" + XSS["htmx"], headers={"h": XSS["on"]})
    [claimed] = store.claim("w-" + XSS["img"], ["q" + XSS["htmx"]], 1)
    store.fail(
        job.id,
        claimed.lease_token,
        {"type": XSS["script"], "message": XSS["htmx"], "traceback": XSS["img"]},
        permanent=True,
    )
    watched = Watched(page)
    page.on("dialog", lambda d: (watched.dialogs.append(d.message), d.dismiss()))
    log_in(page, live_server, "ann", f"/jobs/{job.id}")
    expect(page.locator("pre.json").first).to_contain_text("onerror=alert(1)")
    for path in [
        "/",
        "/jobs",
        "/jobs?" + urlencode({"status": "Failed", "queue": "q" + XSS["htmx"]}),
        "/audit",
    ]:
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
    page.goto(f"{live_server.url}/jobs/{job.id}")
    # let htmx poll and process for a while: still nothing may run or load
    page.wait_for_load_state("networkidle")
    expect(page.locator("#job-live")).to_contain_text("<script>alert(2)</script>")
    screenshot(page, "job-xss-inert")
    assert watched.dialogs == []
    assert [u for u in watched.requests if XSS_URL_MARK in urlsplit(u).path] == []
    assert watched.csp_violations() == []


def test_tour_screenshots(browser, live_server: LiveServer) -> None:
    """Every page with some data, on a laptop, a phone and in dark mode."""
    store = live_server.handle.store
    store.enqueue_many(
        [("index-source", {"path": f"/src/m{i}.py"}, q) for i, q in enumerate(["default", "mail"] * 20)]
    )
    claimed = store.claim("host-a.4242", ["default"], 12)
    for job in claimed[:9]:
        store.complete(job.id, job.lease_token, {"functions": 12, "classes": 3})
    error = {
        "type": "SyntaxError",
        "message": "invalid syntax (m3.py, line 7)",
        "traceback": "Traceback ...\nSyntaxError",
    }
    store.fail(claimed[9].id, claimed[9].lease_token, error, permanent=True)
    store.fail(claimed[10].id, claimed[10].lease_token, error)  # retried with backoff
    failed = claimed[9]
    store.worker_heartbeat(
        WorkerInfo("host-a.4242", "host-a", 4242, ["default", "mail:3"], 4, [claimed[11].id])
    )
    store.worker_heartbeat(WorkerInfo("host-b.977", "host-b", 977, ["reports"], 2, []))
    mail = store.list_jobs(queue="mail", limit=1).items[0]
    store.cancel(mail.id, actor="operator:ann")
    store.requeue(mail.id, actor="operator:ann")
    variants = [
        ("", {"viewport": {"width": 1280, "height": 900}}),
        ("-phone", {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}),
        ("-dark", {"viewport": {"width": 1280, "height": 900}, "color_scheme": "dark"}),
    ]
    for suffix, options in variants:
        ctx = browser.new_context(**options)
        ctx.set_default_timeout(WAIT_MS)
        page = ctx.new_page()
        watched = Watched(page)
        page.goto(f"{live_server.url}/login")
        screenshot(page, f"login{suffix}")
        log_in(page, live_server, "ann", "/")
        for name, path in [
            ("overview", "/"),
            ("jobs", "/jobs"),
            ("job", f"/jobs/{failed.id}"),
            ("workers", "/workers"),
            ("recovery", "/recovery"),
            ("audit", "/audit"),
        ]:
            page.goto(f"{live_server.url}{path}")
            expect(page.locator("main h1")).to_be_visible()
            screenshot(page, f"{name}{suffix}")
        page.keyboard.press("Tab")  # keyboard reachable: the skip link takes focus first
        assert page.evaluate("document.activeElement.className") == "skip"
        assert watched.csp_violations() == []
        ctx.close()


def test_polling_pauses_while_the_tab_is_hidden(page: Page, live_server: LiveServer) -> None:
    log_in(page, live_server, "vic", "/")
    expect(page.locator("#overview-live")).to_be_visible()
    # Record every htmx request and whether console.js cancelled it (it runs first).
    page.evaluate(
        """() => {
        window.__polls = [];
        document.addEventListener("htmx:beforeRequest", (e) => window.__polls.push(e.defaultPrevented));
        window.__hide = (hidden) => Object.defineProperty(document, "visibilityState",
            {configurable: true, get: () => (hidden ? "hidden" : "visible")});
    }"""
    )
    page.evaluate("window.__hide(true)")
    page.wait_for_function("() => window.__polls.length >= 1", timeout=WAIT_MS)  # the next 3 s poll
    assert all(page.evaluate("window.__polls")), "a poll went out while the tab was hidden"
    page.evaluate(
        "window.__polls = []; window.__hide(false); document.dispatchEvent(new Event('visibilitychange'))"
    )
    page.wait_for_function("() => window.__polls.length >= 1", timeout=WAIT_MS)
    assert page.evaluate("window.__polls[0]") is False  # refreshed at once when visible again


def test_reading_and_acting_work_without_javascript(browser, live_server: LiveServer) -> None:
    store = live_server.handle.store
    failed = job_in(store, S.Failed)
    ctx = browser.new_context(java_script_enabled=False)
    ctx.set_default_timeout(WAIT_MS)
    try:
        page = ctx.new_page()
        log_in(page, live_server, "ann", f"/jobs/{failed.id}")
        expect(status_badge(page)).to_have_text("Failed")
        expect(page.locator("#job-live")).to_contain_text("RuntimeError")
        page.click("#act-requeue-fresh")  # a plain form post, then a redirect back
        expect(status_badge(page)).to_have_text("Queued")
        expect(page.locator(".flash.ok")).to_contain_text("Requeued by ann.")
        page.goto(f"{live_server.url}/jobs?status=Queued")
        expect(page.locator("#jobs-table")).to_contain_text(failed.id[-8:])
    finally:
        ctx.close()
