"""The Handlers page and queue latency in a real browser: the handler a live
worker publishes, one click from its jobs; a paused queue's latency growing
on its page as its job waits. Screenshots go to test-artifacts/screenshots/."""

from __future__ import annotations

import re

from playwright.sync_api import BrowserContext, Page, expect

from store.models import WorkerInfo, ts
from tests.browser.helpers import LiveServer, Watched, log_in, screenshot

SEND_INVOICE = {
    "name": "send-invoice",
    "queue": "billing",
    "max_retries": 5,
    "timeout_s": 60.0,
    "lease_ttl_s": 30.0,
    "schedule": None,
    "max_snoozes": 100,
}


def test_handlers_page_and_a_paused_queues_latency_growing(
    context: BrowserContext, live_server: LiveServer
) -> None:
    store = live_server.handle.store
    started = ts(store.now())
    store.worker_heartbeat(
        WorkerInfo(
            "w-billing", "host", 1, ["default", "billing"], 2, started_at=started, handlers=[SEND_INVOICE]
        )
    )
    job = store.enqueue("send-invoice", {"order_id": 7}, queue="billing")
    store.pause_queue("billing", actor="operator:ann")
    page: Page = context.new_page()
    watched = Watched(page)
    log_in(page, live_server, "ann", "/handlers")

    row = page.locator('tr[data-handler="send-invoice"]')
    expect(row).to_contain_text("billing")
    expect(row).to_contain_text("w-billing")
    expect(row.locator("td").nth(6)).to_have_text("1")  # waiting
    screenshot(page, "handlers")
    row.locator("a", has_text="send-invoice").click()
    expect(page.locator(f'a[href="/jobs/{job.id}"]').first).to_be_visible()

    page.goto(f"{live_server.url}/queues/billing")
    latency = page.locator("#queue-latency strong")
    expect(latency).to_have_text(re.compile(r"^\d+(\.\d)? s$"))
    first = float(page.locator("#queue-latency").get_attribute("data-latency-s") or "0")
    store.clock_offset_s += 75  # the job keeps waiting while the queue is paused
    expect(latency).to_have_text(re.compile(r"^(7[5-9]|8\d) s$"), timeout=15_000)  # the page polls every 3 s
    assert float(page.locator("#queue-latency").get_attribute("data-latency-s") or "0") >= first + 75
    screenshot(page, "queue-latency-paused")
    assert watched.csp_violations() == []


def test_a_handlers_metrics_page_charts_its_runs(context: BrowserContext, live_server: LiveServer) -> None:
    store = live_server.handle.store
    store.worker_heartbeat(
        WorkerInfo(
            "w-billing", "host", 1, ["billing"], 2, started_at=ts(store.now()), handlers=[SEND_INVOICE]
        )
    )
    for _ in range(3):
        store.enqueue("send-invoice", {"order_id": 7}, queue="billing")
    jobs = store.claim("w-billing", ["billing"], 3)
    store.clock_offset_s += 0.25
    for job in jobs[:2]:
        store.complete(job.id, job.lease_token)
    store.fail(jobs[2].id, jobs[2].lease_token, {"type": "E", "message": "x", "traceback": None})
    page: Page = context.new_page()
    watched = Watched(page)
    log_in(page, live_server, "ann", "/handlers")
    page.locator('tr[data-handler="send-invoice"] a', has_text="metrics").click()
    expect(page.locator("main h1")).to_have_text("Handler send-invoice")
    runs = page.locator("#graph-runs")
    expect(runs.locator("figcaption")).to_contain_text("Succeeded 2")
    expect(runs.locator("figcaption")).to_contain_text("Retried 1")
    newest = runs.locator("rect.hover title").last  # the value shown on hover
    expect(newest).to_have_text(re.compile(r"Succeeded 2, Failed 0, Retried 1"))
    run_time = page.locator("#graph-run-time")  # runs only in the bin still filling: dots, no line at 0 ms
    expect(run_time.locator("line.filling")).to_have_count(3)
    expect(run_time.locator("polyline")).to_have_count(0)
    p50 = page.locator("#handler-metrics tbody tr").first.locator("td").nth(3)
    # 250 ms of the store's clock plus the real time between the claim and the ack (a loaded
    # machine's tens of ms), never less
    expect(p50).to_have_text(re.compile(r"^2[4-9]\d(\.\d+)?$"))
    screenshot(page, "handler-metrics")
    page.locator('.ranges a[data-range="7d"]').click()
    expect(page.locator('.ranges a[data-range="7d"]')).to_have_attribute("aria-current", "true")
    expect(page.locator("#handler-metrics tbody tr")).to_have_count(168)
    page.set_viewport_size({"width": 390, "height": 844})  # a phone: nothing wider than the screen
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, "handler-metrics-phone")
    table = page.locator("#handler-metrics .graph-table")  # scrolled to p99, the bucket's time stays in view
    table.evaluate("e => { e.scrollLeft = e.scrollWidth; }")
    first = table.locator("tbody tr").first
    box, row_head = table.bounding_box(), first.locator("th").bounding_box()
    assert box is not None and row_head is not None and row_head["x"] >= box["x"] - 1
    p99 = first.locator("td").last.bounding_box()
    assert p99 is not None and p99["x"] + p99["width"] <= box["x"] + box["width"] + 1
    assert watched.csp_violations() == []
