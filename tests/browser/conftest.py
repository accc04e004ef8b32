"""Browser tests of the console: Playwright (Python) driving Debian's Chromium.

Set-up this conftest does itself, because CI runs on a bare machine:
* ``/usr/bin/chromium`` missing: ``apt-get update && apt-get install -y chromium``
  (``npx playwright install`` cannot download browsers here);
* ``static/vendor/`` (htmx, idiomorph, cytoscape) or axe-core missing: ``npm ci && npm run vendor``.

The app runs under a real server (werkzeug's, threaded, on a free port) on the
test's store handle, so the server, the test and (for live tests) a real worker
process share one store. Every test here is marked ``browser``.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Playwright, sync_playwright
from werkzeug.serving import make_server

from tests.backends import StoreHandle
from tests.browser.helpers import REPO, WAIT_MS, LiveServer
from tests.conftest import handle_fixture
from tests.web.console_fixtures import console_app_for

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
HTMX = REPO / "static" / "vendor" / "htmx.min.js"
IDIOMORPH = REPO / "static" / "vendor" / "idiomorph-ext.min.js"
CYTOSCAPE = REPO / "static" / "vendor" / "cytoscape.min.js"
AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


def _run(cmd: list[str], what: str, **kwargs: Any) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=900, **kwargs)
    if result.returncode != 0:
        pytest.fail(f"{what} failed ({' '.join(cmd)}):\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")


def ensure_chromium() -> None:
    if os.path.exists(CHROMIUM):
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    _run(["apt-get", "update"], "apt-get update", env=env)
    _run(["apt-get", "install", "-y", "chromium"], "installing chromium", env=env)


def ensure_htmx() -> None:
    """htmx and idiomorph in static/vendor/, axe-core in node_modules/ (package.json)."""
    if all(p.exists() for p in (HTMX, IDIOMORPH, CYTOSCAPE, AXE)):
        return
    _run(["npm", "ci", "--no-audit", "--no-fund"], "npm ci", cwd=REPO)
    _run(["npm", "run", "vendor"], "npm run vendor", cwd=REPO)


@pytest.fixture(scope="session")
def playwright() -> Iterator[Playwright]:
    ensure_chromium()
    ensure_htmx()
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="session")
def browser(playwright: Playwright) -> Iterator[Browser]:
    chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    yield chromium
    chromium.close()


#: Stores the browser tests run on. The console's views are tested on every
#: store by the Flask-client tests (tests/web); in a real browser one store
#: keeps the suite inside its time budget. LEASEHOLD_BROWSER_BACKENDS widens it.
BROWSER_BACKENDS = os.environ.get("LEASEHOLD_BROWSER_BACKENDS", "sqlite").split(",")


handle = handle_fixture(BROWSER_BACKENDS)


@pytest.fixture
def live_server(handle: StoreHandle) -> Iterator[LiveServer]:
    """The console app under werkzeug's threaded server on a free port."""
    app = console_app_for(handle)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="console-live-server", daemon=True)
    thread.start()
    try:
        yield LiveServer(f"http://127.0.0.1:{server.server_port}", handle)
    finally:
        server.shutdown()
        thread.join(30)
        server.server_close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    ctx.set_default_timeout(WAIT_MS)
    yield ctx
    ctx.close()
