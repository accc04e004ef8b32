"""Operating over months in a real browser: pause a queue from the overview,
see why its job waits, resume it and see the job run; the Periodic page's
next-run countdown moves. Screenshots go to test-artifacts/screenshots/."""

from __future__ import annotations

from playwright.sync_api import BrowserContext, Page, expect

from store.models import Schedule
from tests.browser.helpers import LiveServer, Watched, log_in, screenshot


def test_pause_a_queue_see_why_the_job_waits_resume_and_it_runs(
    context: BrowserContext, live_server: LiveServer
) -> None:
    store = live_server.handle.store
    job = store.enqueue("report", {"day": 1}, queue="mail")
    page: Page = context.new_page()
    watched = Watched(page)
    log_in(page, live_server, "ann", "/")

    row = page.locator("tr", has=page.locator("a", has_text="mail"))
    page.once("dialog", lambda d: d.accept())  # a destructive action asks first
    row.locator('button[data-queue-action="pause"]').click()
    page.wait_for_url(f"{live_server.url}/")
    expect(row.locator(".q-paused")).to_have_text("paused")
    screenshot(page, "overview-queue-paused")
    assert store.claim("w-browser", ["mail"], 1) == []  # decided inside the claim

    page.goto(f"{live_server.url}/jobs/{job.id}")
    expect(page.locator(".why")).to_contain_text("Queue 'mail' paused by ann at")
    screenshot(page, "job-waits-queue-paused")

    page.goto(f"{live_server.url}/queues/mail")
    expect(page.locator("#queue-state")).to_have_text("paused")
    page.once("dialog", lambda d: d.accept())
    page.click("#queue-toggle")  # Resume queue (htmx)
    expect(page.locator("#queue-state")).to_have_text("running")
    expect(page.locator("#queue-live")).to_contain_text("Queue mail resumed by ann.")

    page.goto(f"{live_server.url}/jobs/{job.id}")
    expect(page.locator("#job-status")).to_have_text("Queued")
    expect(page.locator(".why")).not_to_contain_text("paused by")
    [claimed] = store.claim("w-browser", ["mail"], 1)
    expect(page.locator("#job-status")).to_have_text("InProgress")
    store.complete(claimed.id, claimed.lease_token, {"sent": True})
    expect(page.locator("#job-status")).to_have_text("Completed")
    assert watched.csp_violations() == []
    screenshot(page, "job-ran-after-resume")


def test_periodic_page_next_run_countdown_moves(context: BrowserContext, live_server: LiveServer) -> None:
    store = live_server.handle.store
    store.save_schedules(
        [
            Schedule("nightly", "report", "0 3 * * *", "Europe/Paris"),
            Schedule("often", "ping", "* * * * *"),
        ]
    )
    page: Page = context.new_page()
    watched = Watched(page)
    log_in(page, live_server, "ann", "/periodic")
    row = page.locator('tr[data-schedule="often"]')
    expect(page.locator('tr[data-schedule="nightly"]')).to_contain_text("At 03:00, every day")
    countdown = row.locator(".next-run")
    expect(countdown).to_be_visible()
    first = countdown.inner_text()
    expect(countdown).not_to_have_text(first, timeout=5_000)  # ticks every second
    screenshot(page, "periodic-countdown")

    row.get_by_role("button", name="Disable").click()
    expect(row).to_contain_text("disabled")
    expect(row.locator(".next-run")).to_have_count(0)
    row.get_by_role("button", name="Enqueue now").click()
    expect(page.locator("#periodic-table")).to_contain_text("Enqueued ping now")
    assert [j.name for j in store.list_jobs().items] == ["ping"]
    assert watched.csp_violations() == []
