"""Accessibility of every console page, checked by axe-core (from the npm
registry: node_modules/axe-core) inside Chromium: no serious or critical
violation at desktop (1440×900) and phone (390×844) widths, in light and
dark. Every page is also screenshot (test-artifacts/screenshots/a11y-*)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from store import bulk
from store.flow_rules import QueueLimits
from store.models import JobSpec, Schedule, WorkerInfo, ts
from tests.browser.conftest import AXE
from tests.browser.helpers import WAIT_MS, LiveServer, log_in, screenshot

VARIANTS = {
    "desktop-light": {"viewport": {"width": 1440, "height": 900}, "color_scheme": "light"},
    "desktop-dark": {"viewport": {"width": 1440, "height": 900}, "color_scheme": "dark"},
    "phone-light": {
        "viewport": {"width": 390, "height": 844},
        "is_mobile": True,
        "has_touch": True,
        "color_scheme": "light",
    },
    "phone-dark": {
        "viewport": {"width": 390, "height": 844},
        "is_mobile": True,
        "has_touch": True,
        "color_scheme": "dark",
    },
}
HANDLER = {
    "name": "index-source",
    "queue": "default",
    "max_retries": 3,
    "timeout_s": 60.0,
    "lease_ttl_s": 30.0,
    "schedule": None,
    "max_snoozes": 100,
}


def _seed(live_server: LiveServer) -> dict[str, str]:
    """Some of everything, so each page shows its tables, forms and badges."""
    store = live_server.handle.store
    store.enqueue_many(
        [("index-source", {"path": f"/src/m{i}.py"}, q) for i, q in enumerate(["default", "mail"] * 6)]
    )
    claimed = store.claim("host-a.4242", ["default"], 6)
    store.complete(claimed[0].id, claimed[0].lease_token, {"ok": True})
    error = {
        "type": "SyntaxError",
        "message": "invalid syntax (m3.py, line 7)",
        "traceback": "Traceback ...\nSyntaxError",
    }
    store.fail(claimed[1].id, claimed[1].lease_token, error, permanent=True)
    store.fail(claimed[2].id, claimed[2].lease_token, error)
    store.report_progress(claimed[3].id, claimed[3].lease_token, 0.4, "step 4")
    started = ts(store.now())
    store.worker_heartbeat(
        WorkerInfo(
            "host-a.4242",
            "host-a",
            4242,
            ["default", "mail"],
            4,
            [claimed[3].id],
            started_at=started,
            handlers=[HANDLER],
        )
    )
    store.save_schedules([Schedule("nightly", "index-source", "0 3 * * *")])
    store.set_queue_limits("mail", QueueLimits(concurrency=2), actor="operator:ann")
    store.pause_queue("mail", actor="operator:ann")
    batch = store.create_batch(
        [JobSpec("index-source", {"n": n}) for n in range(3)], JobSpec("index-source", None)
    )
    op = bulk.start(store, "retry", {"status": "Failed"}, "operator:ann", 1)
    return {
        "login": "/login",
        "overview": "/",
        "jobs": "/jobs",
        "jobs-search": "/jobs?payload=path%3Dnone",
        "job": f"/jobs/{claimed[1].id}",
        "job-running": f"/jobs/{claimed[3].id}",
        "workers": "/workers",
        "handlers": "/handlers",
        "handler": f"/handlers/{HANDLER['name']}?window=24h",
        "periodic": "/periodic",
        "queue": "/queues/mail",
        "recovery": "/recovery",
        "operations": "/operations",
        "operation": f"/operations/{op.id}",
        "audit": "/audit",
        "batches": "/batches",
        "batch": f"/batches/{batch.id}",
    }


def _serious(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(AXE.read_text())  # evaluated by the debugger: the page's CSP does not apply
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [
        {
            "id": v["id"],
            "impact": v["impact"],
            "nodes": [n["target"] for n in v["nodes"]][:5],
            "help": v["help"],
        }
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_page_has_no_serious_accessibility_violation(
    browser: Browser, live_server: LiveServer, variant: str
) -> None:
    pages = _seed(live_server)
    ctx = browser.new_context(**VARIANTS[variant])
    ctx.set_default_timeout(WAIT_MS)
    found: dict[str, list[dict[str, Any]]] = {}
    try:
        page = ctx.new_page()
        page.goto(f"{live_server.url}/login")
        found["login"] = _serious(page)
        screenshot(page, f"a11y-login-{variant}")
        log_in(page, live_server, "ann", "/")
        for name, path in pages.items():
            if name == "login":
                continue
            page.goto(f"{live_server.url}{path}")
            page.wait_for_selector("main h1")
            found[name] = _serious(page)
            screenshot(page, f"a11y-{name}-{variant}")
    finally:
        ctx.close()
    bad = {k: v for k, v in found.items() if v}
    assert not bad, json.dumps(bad, indent=1)
