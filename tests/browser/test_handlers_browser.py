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
