"""Alerts and job logs in a real browser: an operator creates a rule with
the form, mutes it and sends a test to a real webhook sink; a running job's
page shows its log lines as they are written (the panel tails), and stops
polling once the job is finished. Screenshots go to test-artifacts/screenshots/."""

from __future__ import annotations

from playwright.sync_api import BrowserContext, Page, expect

from store.job_logs import LogLine, append_logs
from store.lifecycle import JobStatus
from tests.alerts_sink import Sink, start_sink
from tests.browser.helpers import LiveServer, Watched, log_in, screenshot
from tests.store.helpers import job_in


def test_an_operator_creates_mutes_and_tests_a_rule(context: BrowserContext, live_server: LiveServer) -> None:
    server, sink = start_sink(Sink())
    try:
        page: Page = context.new_page()
        watched = Watched(page)
        log_in(page, live_server, "ann", "/alerts")
        expect(page.locator('nav a[aria-current="page"]')).to_have_text("Alerts")
        page.fill('input[name="name"]', "mail fails")
        page.select_option('select[name="when"]', "job_failed")
        page.fill('input[name="queue"]', "mail")
        page.fill('input[name="webhook"]', sink.url)
        page.fill('input[name="secret"]', "k3y")
        page.click("text=Create rule")
        row = page.locator("tr[data-alert]")
        expect(row).to_contain_text("mail fails")
        expect(row).to_contain_text("signed")
        expect(page.locator("body")).not_to_contain_text("s3cr3t-path")
        row.locator("button", has_text="Mute 1 h").click()
        expect(page.locator("tr[data-alert]")).to_contain_text("muted until")
        page.locator("tr[data-alert] button", has_text="Test").click()
        expect(page.locator("#alerts-table")).to_contain_text("delivered (HTTP 200)")
        assert len(sink.wait_for(1, 5)) == 1
        screenshot(page, "alerts")
        assert watched.csp_violations() == []
    finally:
        server.shutdown()
        server.server_close()


def test_the_job_page_tails_its_log_lines(context: BrowserContext, live_server: LiveServer) -> None:
    store = live_server.handle.store
    job = job_in(store, JobStatus.InProgress)
    page: Page = context.new_page()
    watched = Watched(page)
    log_in(page, live_server, "vic", f"/jobs/{job.id}")
    panel = page.locator("#job-logs")
    expect(panel).to_contain_text("No log line yet")
    append_logs(store, [LogLine(job.id, 1, store.now(), "INFO", "step 1 of 3 done")])
    expect(panel).to_contain_text("#1 INFO step 1 of 3 done", timeout=10_000)  # the panel polls every 2 s
    screenshot(page, "job-logs")
    assert watched.csp_violations() == []
