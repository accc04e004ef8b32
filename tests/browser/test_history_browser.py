"""The overview's history graphs in a real browser: a counted workload shows
in the graph's table, the live refresh picks up more, the range switch
keeps the figures, and the lines follow the light and dark themes.
Screenshots go to test-artifacts/screenshots/."""

from __future__ import annotations

import re

from playwright.sync_api import BrowserContext, Page, expect

from tests.browser.helpers import LiveServer, Watched, log_in, screenshot


def test_overview_graph_table_shows_a_counted_workload(
    context: BrowserContext, live_server: LiveServer
) -> None:
    store = live_server.handle.store
    store.enqueue_many([("resize", {"i": i}) for i in range(12)])
    claimed = store.claim("w-browser", ["default"], 8)
    for job in claimed[:5]:
        store.complete(job.id, job.lease_token, {"ok": True})
    page: Page = context.new_page()
    watched = Watched(page)
    log_in(page, live_server, "vic", "/")

    throughput = page.locator("#graph-throughput")
    expect(throughput.locator('td[data-total="enqueued"]')).to_have_text("12")
    expect(throughput.locator('td[data-total="completed"]')).to_have_text("5")
    expect(throughput.locator("svg[role=img]")).to_have_attribute(
        "aria-label",
        re.compile(r"^Throughput: completed 5, enqueued 12; busiest bin 12\. Per 5 minutes since "),
    )
    light = throughput.locator("polyline.k-completed").evaluate("e => getComputedStyle(e).stroke")

    for job in claimed[5:]:  # the live refresh (every 3 s) shows them
        store.complete(job.id, job.lease_token, {"ok": True})
    expect(throughput.locator('td[data-total="completed"]')).to_have_text("8")
    screenshot(page, "overview-history-1h")

    page.locator('.ranges a[data-range="7d"]').click()
    expect(page.locator(".history")).to_have_attribute("data-range", "7d")
    expect(page.locator('#graph-throughput td[data-total="completed"]')).to_have_text("8")
    expect(page.locator('#graph-failures td[data-total="failed"]')).to_have_text("0")

    page.emulate_media(color_scheme="dark")
    dark = page.locator("#graph-throughput polyline.k-completed").evaluate("e => getComputedStyle(e).stroke")
    assert light != dark, "the graph's lines do not follow the dark theme"
    screenshot(page, "overview-history-7d-dark")
    assert watched.csp_violations() == []
