"""What a new user reads in the console, as the browser renders it: status
labels as the API writes them (``InProgress``, not upper-cased by the
stylesheet), an Operations entry in the navigation that stays current on an
operation's page, the operations table styled like the others, and cron
descriptions without "every hour, every day" noise."""

from __future__ import annotations

from playwright.sync_api import BrowserContext, Page, expect

from store import bulk
from store.models import Schedule
from tests.browser.helpers import LiveServer, Watched, log_in, screenshot


def test_labels_navigation_and_cron_words(context: BrowserContext, live_server: LiveServer) -> None:
    store = live_server.handle.store
    store.enqueue("report", {"day": 1}, queue="mail")
    store.save_schedules([Schedule("often", "ping", "* * * * *")])
    operation = bulk.start(store, "cancel", {"queue": "nowhere"}, "operator:ann", 0)
    page: Page = context.new_page()
    watched = Watched(page)
    log_in(page, live_server, "ann", "/")

    card = page.locator("a.card.s-inprogress .card-label")
    assert card.inner_text() == "InProgress"  # innerText applies text-transform
    header = page.locator("th.status-name", has_text="InProgress").first
    assert header.inner_text() == "InProgress"

    page.locator("nav a", has_text="Operations").click()
    page.wait_for_url(f"{live_server.url}/operations")
    expect(page.locator('nav a[aria-current="page"]')).to_have_text("Operations")
    expect(page.locator("table#operations.dense")).to_be_visible()
    page.locator("table#operations a").first.click()
    page.wait_for_url(f"{live_server.url}/operations/{operation.id}")
    expect(page.locator('nav a[aria-current="page"]')).to_have_text("Operations")
    screenshot(page, "operation-page-nav")

    page.goto(f"{live_server.url}/periodic")
    expect(page.locator('tr[data-schedule="often"]')).to_contain_text("Every minute")
    expect(page.locator('tr[data-schedule="often"]')).not_to_contain_text("every hour")
    assert watched.csp_violations() == []
