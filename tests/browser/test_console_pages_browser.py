"""Console pages that read wrong in a real browser, each reproduced: graphs,
limits, the batch page and list, overdue workers, the phone layout, the
bulk panel's defaults and refusals, the payload hint, the audit's limits
rows, and the display controls (theme, live updates) remembered."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from store.flow_rules import QueueLimits
from store.lifecycle import JobStatus
from store.models import JobSpec, WorkerInfo, ts
from tests.browser.helpers import WAIT_MS, LiveServer, Watched, log_in, screenshot
from tests.store.helpers import job_in

S = JobStatus
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


def _phone(browser: Browser) -> BrowserContext:
    ctx = browser.new_context(**PHONE)
    ctx.set_default_timeout(WAIT_MS)
    return ctx


def _inside_viewport(page: Page, selector: str) -> bool:
    return page.eval_on_selector(
        selector, "e => { const r = e.getBoundingClientRect(); return r.left >= 0 && r.right <= innerWidth; }"
    )


def test_graphs_do_not_draw_the_filling_bin_and_show_values_on_hover(
    page: Page, live_server: LiveServer
) -> None:
    store = live_server.handle.store
    store.enqueue_many([("t", {"i": i}) for i in range(4)])
    for job in store.claim("w", ["default"], 4):
        store.complete(job.id, job.lease_token, None)
        job_in(store, S.Failed)
    page.set_viewport_size({"width": 1440, "height": 900})
    log_in(page, live_server, "vic", "/")
    graph = page.locator("#graph-throughput")
    points = graph.locator("polyline.k-completed").get_attribute("points") or ""
    assert len(points.split()) == 11  # twelve bins, the newest (filling) is a dot instead
    expect(graph.locator("line.filling.k-completed")).to_have_count(1)
    hover = graph.locator("rect.hover").last
    assert "(still filling): Completed 4, Enqueued 8" in (hover.locator("title").text_content() or "")
    # Completed is drawn after (over) Enqueued.
    order = graph.locator("polyline").evaluate_all("ls => ls.map(l => l.getAttribute('class'))")
    assert order == ["line k-enqueued", "line k-completed"]
    # The failures table's last column is whole at 1440 px.
    table = page.locator("#graph-failures .graph-table")
    last = page.locator("#graph-failures .graph-table thead th").last
    assert (
        last.evaluate("e => e.getBoundingClientRect().right")
        <= table.evaluate("e => e.getBoundingClientRect().right") + 0.5
    )
    assert table.evaluate("e => e.scrollWidth <= e.clientWidth")
    screenshot(page, "overview-graphs-1440")


def test_limits_table_flags_running_jobs_over_a_lowered_limit(page: Page, live_server: LiveServer) -> None:
    store = live_server.handle.store
    store.set_queue_limits("mail", QueueLimits(concurrency=3), actor="operator:ann")
    for n in range(3):
        store.enqueue("t", {"n": n}, queue="mail")
    assert len(store.claim("w", ["mail"], 3)) == 3
    store.set_queue_limits("mail", QueueLimits(concurrency=1), actor="operator:ann")
    log_in(page, live_server, "ann", "/queues/mail")
    row = page.locator("#limit-concurrency")
    expect(row).to_contain_text("1 running")
    expect(page.locator("#limit-over-concurrency")).to_have_text("over the limit by 2")
    assert page.locator("#queue-limits table").evaluate("e => e.classList.contains('dense')")
    screenshot(page, "queue-limit-over")

    page.goto(f"{live_server.url}/audit")
    entry = page.locator("#audit-table tr", has_text="queue_limits_set").first
    expect(entry.locator("a", has_text="queue mail")).to_have_attribute("href", "/queues/mail")
    entry.locator("details summary").click()
    expect(entry.locator("pre.json")).to_contain_text('"concurrency": 1')


def test_batch_pages_list_progress_and_navigation(page: Page, live_server: LiveServer) -> None:
    store = live_server.handle.store
    older = store.create_batch([JobSpec("t", {"n": n}) for n in range(4)])
    batch = store.create_batch([JobSpec("t", {"n": n}) for n in range(10)], JobSpec("t", None))
    for job in store.claim("w", ["default"], 14)[:5]:
        store.complete(job.id, job.lease_token, None)
    log_in(page, live_server, "vic", "/batches")
    expect(page.locator("nav[aria-label=Console] a[aria-current=page]")).to_have_text("Batches")
    rows = page.locator("#batches-table tbody tr")
    expect(rows).to_have_count(2)
    assert rows.first.get_attribute("data-batch") == batch.id
    assert rows.nth(1).get_attribute("data-batch") == older.id
    screenshot(page, "batches")
    rows.first.locator("a").click()
    expect(page.locator(".crumbs a")).to_have_text("Batches")
    expect(page.locator("nav[aria-label=Console] a[aria-current=page]")).to_have_text("Batches")
    expect(page.locator("#batch-members tbody tr")).to_have_count(10)
    bar = page.locator("#batch-bar")
    assert bar.evaluate("e => e.getBoundingClientRect().width") > 600  # a real bar, not a tiny one
    done = store.get_batch(batch.id).counts.get("Completed", 0)
    expect(bar).to_have_attribute("aria-valuenow", str(done * 10))


def test_an_overdue_worker_is_not_shown_alive(page: Page, live_server: LiveServer) -> None:
    store = live_server.handle.store
    store.worker_heartbeat(WorkerInfo("w-frozen", "host", 1, ["default"], 2, []))
    store.clock_offset_s += store.settings.lease_ttl_s * 0.9  # a beat missed, not yet silent
    log_in(page, live_server, "vic", "/workers")
    expect(page.locator("[data-state]").first).to_have_text("overdue")
    page.goto(f"{live_server.url}/")
    expect(page.locator("#workers-overdue")).to_have_text("1 overdue")


def test_phone_workers_and_jobs_fit_and_filters_fold(browser: Browser, live_server: LiveServer) -> None:
    store = live_server.handle.store
    store.worker_heartbeat(WorkerInfo("host-a.4242", "host-a", 4242, ["default", "mail"], 4, []))
    for n in range(3):
        store.enqueue("index-source", {"n": n})
    ctx = _phone(browser)
    try:
        page = ctx.new_page()
        log_in(page, live_server, "ann", "/workers")
        assert _inside_viewport(page, "[data-stop='host-a.4242']")
        assert _inside_viewport(page, "td[data-label=Heartbeat]")
        screenshot(page, "workers-phone-cards")
        page.goto(f"{live_server.url}/jobs")
        expect(page.locator("#filters-box")).not_to_have_attribute("open", "")
        assert _inside_viewport(page, "#jobs-table td[data-label=Id] code")
        assert page.locator("#jobs-table th", has_text="Progress").count() == 0
        page.click("#filters-box summary")
        expect(page.locator("#job-filters")).to_be_visible()
        page.goto(f"{live_server.url}/jobs?queue=default")
        expect(page.locator("#filters-box")).to_have_attribute("open", "")
        screenshot(page, "jobs-phone")
    finally:
        ctx.close()


def test_bulk_panel_defaults_to_no_action_and_acts_on_a_payload_search(
    page: Page, live_server: LiveServer
) -> None:
    store = live_server.handle.store
    failed = [job_in(store, S.Failed) for _ in range(2)]  # payload {"s": "Failed"}
    watched = Watched(page)
    bad: list[str] = []
    page.on("response", lambda r: bad.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    log_in(page, live_server, "ann", "/jobs")
    page.goto(f"{live_server.url}/jobs?payload=user%3Dnobody")
    expect(page.locator("#payload-hint")).to_contain_text("key=value")
    page.goto(f"{live_server.url}/jobs?payload=s%3DFailed")
    select = page.locator("#bulk-every select[name=action]")
    assert select.input_value() == ""
    page.click("#bulk-preview")  # required: nothing is sent without a choice
    assert page.locator("#bulk-confirm").count() == 0
    select.select_option("retry")
    page.click("#bulk-preview")
    expect(page.locator("#bulk-panel")).to_contain_text("2 job(s) match and can be retried now")
    page.click("#bulk-confirm")
    page.wait_for_url(f"{live_server.url}/operations/*")
    expect(page.locator("#op-state")).to_have_text("done", timeout=WAIT_MS)
    assert {store.get(j.id).status for j in failed} == {S.Queued}
    assert bad == [] and watched.errors == []


def test_act_on_the_selected_rows(page: Page, live_server: LiveServer) -> None:
    store = live_server.handle.store
    jobs = [store.enqueue("t", {"n": n}) for n in range(4)]
    log_in(page, live_server, "ann", "/jobs")
    chosen = [jobs[0].id, jobs[2].id]
    for job_id in chosen:
        page.check(f"[data-row-select][value='{job_id}']")
    expect(page.locator("#bulk-selected-count")).to_contain_text("2 row(s) selected")
    # The live list does not refresh (and drop the selection) while rows are checked.
    page.evaluate(
        """() => { window.__polls = [];
        document.addEventListener("htmx:beforeRequest", (e) => window.__polls.push(e.defaultPrevented)); }"""
    )
    page.wait_for_function("() => window.__polls.length >= 1")
    assert all(page.evaluate("window.__polls"))
    page.select_option("#bulk-selected select[name=action]", "cancel")
    page.click("#bulk-preview-selected")
    expect(page.locator("#bulk-panel")).to_contain_text("2 job(s) match and can be canceled")
    page.click("#bulk-confirm")
    page.wait_for_url(f"{live_server.url}/operations/*")
    expect(page.locator("#op-state")).to_have_text("done", timeout=WAIT_MS)
    assert [store.get(j.id).status for j in jobs] == [S.Canceled, S.Queued, S.Canceled, S.Queued]


def test_new_job_form_checks_json_and_fills_defaults(page: Page, live_server: LiveServer) -> None:
    store = live_server.handle.store
    handler = {
        "name": "index-source",
        "queue": "indexing",
        "max_retries": 7,
        "timeout_s": 90.0,
        "lease_ttl_s": 30.0,
    }
    store.worker_heartbeat(
        WorkerInfo("w-1", "h", 1, ["indexing"], 2, started_at=ts(store.now()), handlers=[handler])
    )
    log_in(page, live_server, "ann", "/jobs")
    page.click("#new-job-link")
    page.select_option("#new-name", "index-source")
    expect(page.locator("#new-queue")).to_have_value("indexing")
    expect(page.locator("#new-max_retries")).to_have_value("7")
    page.fill("#new-payload", '{"path": ')
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    page.click("#new-job-submit")
    expect(page.locator("#payload-error")).to_contain_text("not JSON")
    expect(page.locator("#new-payload")).to_have_attribute("aria-invalid", "true")
    assert posts == [] and store.list_jobs(limit=5).items == []
    page.fill("#new-payload", '{"path": "/src/a.py"}')
    page.click("#new-job-submit")
    page.wait_for_url(f"{live_server.url}/jobs/*")
    expect(page.locator(".flash.ok")).to_contain_text("Enqueued by ann.")
    [job] = store.list_jobs(limit=5).items
    assert (job.queue, job.max_retries, job.payload) == ("indexing", 7, {"path": "/src/a.py"})
    screenshot(page, "job-new-enqueued")


def test_display_controls_are_remembered(page: Page, live_server: LiveServer) -> None:
    log_in(page, live_server, "vic", "/")
    expect(page.locator("#display-controls")).to_be_visible()
    light_bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    page.select_option("#theme-choice", "dark")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    page.goto(f"{live_server.url}/workers")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") != light_bg
    expect(page.locator("#theme-choice")).to_have_value("dark")

    page.goto(f"{live_server.url}/")
    page.evaluate(
        """() => { window.__polls = [];
        document.addEventListener("htmx:beforeRequest", (e) => window.__polls.push(e.defaultPrevented)); }"""
    )
    page.click("#live-toggle")
    expect(page.locator("#live-toggle")).to_have_attribute("aria-pressed", "true")
    page.wait_for_function("() => window.__polls.length >= 1")  # the next 3 s poll: skipped
    assert all(page.evaluate("window.__polls"))
    page.reload()
    expect(page.locator("#live-toggle")).to_have_text("Resume live updates")
    page.click("#live-toggle")
    page.select_option("#live-interval", "10")
    page.reload()
    expect(page.locator("#live-interval")).to_have_value("10")
    page.evaluate(
        """() => { window.__polls = [];
        document.addEventListener("htmx:beforeRequest", (e) => window.__polls.push(e.defaultPrevented)); }"""
    )
    page.wait_for_function("() => window.__polls.length >= 3")  # polls at 3 s, 6 s, 9 s
    sent = page.evaluate("window.__polls").count(False)
    assert sent <= 1, "a 10 s interval let a 3 s poll through twice"


def test_dependency_graphs_on_the_batch_and_job_pages(page: Page, live_server: LiveServer) -> None:
    store = live_server.handle.store
    chain = store.create_batch(
        [JobSpec("step", {"n": n}) for n in range(3)], JobSpec("summary", None), kind="chain"
    )
    [first] = store.claim("w", ["default"], 1)
    store.complete(first.id, first.lease_token, None)
    watched = Watched(page)
    log_in(page, live_server, "vic", f"/batches/{chain.id}")
    graph = page.locator("#dep-graph")
    expect(graph).to_have_attribute("data-drawn", "4")  # three steps and the callback
    edges = page.evaluate("window.__lhGraph.edges().length")
    assert edges == 2 + 3  # each step after the one before; every step before the callback
    done = page.evaluate(f"window.__lhGraph.getElementById('{first.id}').style('background-color')")
    waiting = page.evaluate(
        f"window.__lhGraph.getElementById('{chain.callback_job_id}').style('background-color')"
    )
    assert done != waiting  # coloured by status
    screenshot(page, "batch-graph")
    page.evaluate(f"window.__lhGraph.getElementById('{chain.callback_job_id}').emit('tap')")
    page.wait_for_url(f"{live_server.url}/jobs/{chain.callback_job_id}")
    expect(page.locator("#dep-graph")).to_have_attribute("data-drawn", "4")  # the callback and its 3 parents
    assert watched.csp_violations() == [] and watched.errors == []
