"""The console mounted at /ops in a host app (tests/web/host_app.py), in a real
browser: log in through the host, act as an operator at /ops, and the host's
own page keeps its header and session."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from playwright.sync_api import BrowserContext, Page, expect
from werkzeug.serving import make_server

from store.lifecycle import JobStatus
from tests.backends import StoreHandle
from tests.browser.helpers import LiveServer, Watched, screenshot
from tests.web.host_app import HOST_CSP, HOST_HEADER, create_host_app


@pytest.fixture
def host_server(handle: StoreHandle) -> Iterator[LiveServer]:
    app = create_host_app(handle.store, STORE_URL=handle.url, LEASE_TTL=handle.store.settings.lease_ttl_s)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="host-live-server", daemon=True)
    thread.start()
    try:
        yield LiveServer(f"http://127.0.0.1:{server.server_port}", handle)
    finally:
        server.shutdown()
        thread.join(30)
        server.server_close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


def test_operator_logs_in_through_the_host_and_cancels_at_ops(page: Page, host_server: LiveServer) -> None:
    store = host_server.handle.store
    job = store.enqueue("noop", {})
    watched = Watched(page)

    # Not logged in: /ops sends the browser to the host's login, and back.
    page.goto(f"{host_server.url}/ops/jobs/{job.id}")
    page.wait_for_url(f"{host_server.url}/login?next=*")
    page.fill("input[name=name]", "alice")
    page.fill("input[name=password]", "alice-pw")
    page.click("button")
    page.wait_for_url(f"{host_server.url}/ops/jobs/{job.id}")

    expect(page.locator("#job-status")).to_have_text("Queued")
    expect(page.locator("header.top")).to_contain_text("alice")
    page.once("dialog", lambda d: d.accept())
    page.click("#act-cancel")
    expect(page.locator("#job-status")).to_have_text("Canceled")
    assert store.get(job.id).status is JobStatus.Canceled
    assert any(e.actor == "operator:alice" for e in store.events(job.id))
    assert watched.csp_violations() == []
    screenshot(page, "embed-ops-job-canceled")

    # The host's own page: its header and CSP, and the same logged-in session.
    response = page.goto(f"{host_server.url}/")
    assert response is not None
    assert response.headers[HOST_HEADER[0].lower()] == HOST_HEADER[1]
    assert response.headers["content-security-policy"] == HOST_CSP
    assert "cache-control" not in response.headers
    expect(page.locator("#who")).to_have_text("alice")
    expect(page.locator("#filter")).to_have_text("5 seconds (host)")
