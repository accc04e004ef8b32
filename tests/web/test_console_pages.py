"""Console pages and their HTMX fragments (Flask test client, every store)."""

# ruff: noqa: F811 - the fixtures are imported from console_fixtures and requested by name
from __future__ import annotations

import re

import pytest

from store.base import JobStore
from store.lifecycle import JobStatus
from store.models import WorkerInfo
from tests.store.helpers import expire_leases, job_in
from tests.web.console_fixtures import (  # noqa: F401 - fixtures
    ConsoleClient,
    console_app,
    operator,
    viewer,
)

S = JobStatus
XSS = '<img src=x onerror=alert(1)><div hx-get="/x" hx-trigger="load">boom</div><script>alert(2)</script>'


def fragment(html: str, element_id: str) -> bool:
    """True when ``html`` is just the fragment ``element_id`` (no page around it)."""
    return "<html" not in html and re.match(rf'\s*<\w+ id="{element_id}"', html) is not None


def worker(
    store: JobStore, wid: str = "w-1", queues: tuple[str, ...] = ("default",), jobs: list[str] | None = None
):
    store.worker_heartbeat(WorkerInfo(wid, "host-a", 4242, list(queues), 4, jobs or []))


PAGE_FRAGMENTS = [
    ("/", "overview-live"),
    ("/jobs", "jobs-table"),
    ("/workers", "workers-table"),
    ("/recovery", "recovery-live"),
    ("/audit", "audit-table"),
]


@pytest.mark.parametrize(("path", "element_id"), PAGE_FRAGMENTS)
def test_page_or_fragment_from_one_endpoint(viewer: ConsoleClient, path: str, element_id: str) -> None:
    page = viewer.get(path)
    assert page.status_code == 200
    assert "<html" in page.text and f'id="{element_id}"' in page.text
    assert "HX-Request" in page.headers["Vary"]
    part = viewer.get(path, htmx=True)
    assert part.status_code == 200
    assert fragment(part.text, element_id), part.text[:200]
    assert "HX-Request" in part.headers["Vary"]


def test_history_restore_gets_the_whole_page(viewer: ConsoleClient) -> None:
    response = viewer.client.get(
        "/jobs", headers={"HX-Request": "true", "HX-History-Restore-Request": "true"}
    )
    assert "<html" in response.text


def test_overview_counts_failures_throughput_workers_and_expired(
    viewer: ConsoleClient, store: JobStore
) -> None:
    job_in(store, S.Queued, queue="mail")
    job_in(store, S.Completed)
    failed = store.enqueue("resize", {"n": 1})
    [claimed] = store.claim("w-x", ["default"], 1)
    store.fail(
        claimed.id,
        claimed.lease_token,
        {"type": "IOError", "message": "disk full", "traceback": None},
        permanent=True,
    )
    job_in(store, S.InProgress)
    expire_leases(store)
    worker(store)
    html = viewer.get("/").text
    assert re.search(r"Completed</span>\s*<span class=\"card-value\">1<", html)
    assert re.search(r"Expired leases</span>\s*<span class=\"card-value\">1<", html)
    assert "mail" in html and "disk full" in html and failed.id[-8:] in html
    assert "History, last 1 hour" in html and 'data-total="completed">1<' in html
    assert re.search(r"Workers alive</span>\s*<span class=\"card-value\">1<", html)


def test_jobs_filters_and_cursor_paging(viewer: ConsoleClient, store: JobStore) -> None:
    ids = [store.enqueue("a", {"i": i}).id for i in range(5)]
    store.enqueue("b", {}, queue="other")
    first = viewer.get("/jobs?name=a&limit=25", htmx=True).text
    assert all(i[:8] in first for i in ids)
    assert ">other<" not in first
    page1 = viewer.get("/jobs?limit=25&queue=default").text
    assert "Next" not in page1
    store.enqueue_many([("a", {"i": i}) for i in range(30)])
    page1 = viewer.get("/jobs?limit=25&queue=default").text
    cursor = re.search(r'href="(/jobs\?[^"]*cursor=[^"]+)"', page1)
    assert cursor, "no next-page link"
    page2 = viewer.get(cursor.group(1).replace("&amp;", "&"))
    assert page2.status_code == 200 and "First page" in page2.text
    rows1 = set(re.findall(r'<code title="([0-9a-f-]{36})"', page1))
    rows2 = set(re.findall(r'<code title="([0-9a-f-]{36})"', page2.text))
    assert len(rows1) == 25 and len(rows2) == 10 and not rows1 & rows2


def test_jobs_status_filter_and_bad_inputs(viewer: ConsoleClient, store: JobStore) -> None:
    failed = job_in(store, S.Failed)
    queued = job_in(store, S.Queued)
    html = viewer.get("/jobs?status=Failed").text
    assert failed.id[-8:] in html and queued.id[-8:] not in html
    assert "unknown status" in viewer.get("/jobs?status=Lost").text
    assert viewer.get("/jobs?cursor=%%%bad").status_code == 400


def test_exact_id_jumps_to_the_job_and_a_short_id_filters(viewer: ConsoleClient, store: JobStore) -> None:
    job = store.enqueue("t", {})
    other = store.enqueue("t", {})
    response = viewer.get(f"/jobs?id={job.id}")
    assert response.status_code == 303 and response.headers["Location"] == f"/jobs/{job.id}"
    assert viewer.get(f"/jobs?id={job.id}", htmx=True).headers["HX-Redirect"] == f"/jobs/{job.id}"
    html = viewer.get(f"/jobs?id=…{job.id[-8:]}").text  # the short id the console shows, pasted
    assert job.id[-8:] in html and other.id[-8:] not in html
    assert "No job has id" in viewer.get("/jobs?id=00000000-0000-0000-0000-000000000000").text


def test_oldest_first_sorting(viewer: ConsoleClient, store: JobStore) -> None:
    first, second = store.enqueue("first-job"), store.enqueue("second-job")
    oldest = viewer.get("/jobs?sort=oldest").text
    assert 'value="oldest" selected' in oldest
    newest = viewer.get("/jobs").text
    if (first.last_updated_at, first.id) < (second.last_updated_at, second.id):
        assert oldest.index(first.id[-8:]) < oldest.index(second.id[-8:])
        assert newest.index(second.id[-8:]) < newest.index(first.id[-8:])


def test_job_page_shows_everything_and_escapes_job_data(viewer: ConsoleClient, store: JobStore) -> None:
    job = store.enqueue(
        "render",
        {"html": XSS},
        headers={"X-Trace": XSS},
        max_retries=2,
    )
    [claimed] = store.claim("w-1", ["default"], 1)
    error = {"type": "ValueError", "message": XSS, "traceback": "Traceback (most recent call last):\n  boom"}
    store.fail(claimed.id, claimed.lease_token, error)
    html = viewer.get(f"/jobs/{job.id}").text
    assert "<img src=x" not in html and "<script>alert" not in html and '<div hx-get="/x"' not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "Traceback (most recent call last)" in html
    assert "1/2" in html  # retries used x/y
    # every block with job data is inert for htmx
    for section in re.findall(r"<(?:pre|p|td|dd)[^>]*>[^<]*&lt;img", html):
        assert section
    assert html.count("hx-disable") >= 4
    assert "Timeline" in html and "w-1" in html


def test_an_expired_job_says_why_it_never_ran(viewer: ConsoleClient, store: JobStore) -> None:
    waiting = store.enqueue("t", {}, expires_in_s=3600)
    assert "not run if not started by then" in viewer.get(f"/jobs/{waiting.id}").text
    job = store.enqueue("t", {}, queue="late", expires_in_s=5)
    store.clock_offset_s += 6  # type: ignore[attr-defined]
    assert store.claim("w-1", ["late"], 1) == []
    html = viewer.get(f"/jobs/{job.id}").text
    assert 'data-status="Canceled"' in html and "<strong>Expired</strong>" in html
    assert "reached before it started: canceled by a claim, never run" in html


def test_running_job_polls_and_a_terminal_one_stops(viewer: ConsoleClient, store: JobStore) -> None:
    job = store.enqueue("t", {})
    worker(store, jobs=[job.id])
    store.claim("w-1", ["default"], 1, lease_ttl_s=30)
    live = viewer.get(f"/jobs/{job.id}", htmx=True).text
    assert fragment(live, "job-live")
    assert 'hx-trigger="every 2s' in live and "data-countdown" in live
    assert "Running on w-1" in live
    store.cancel(job.id, actor="operator:ann")
    done = viewer.get(f"/jobs/{job.id}", htmx=True).text
    assert fragment(done, "job-live")
    assert "hx-trigger" not in done.split(">", 1)[0] and 'data-status="Canceled"' in done


def test_job_not_found(viewer: ConsoleClient) -> None:
    assert viewer.get("/jobs/nope").status_code == 404


def test_why_not_running_scheduled_and_backoff(viewer: ConsoleClient, store: JobStore) -> None:
    later = store.enqueue("t", {}, delay_s=600)
    assert "Scheduled for later" in viewer.get(f"/jobs/{later.id}").text
    job = store.enqueue("t", {}, queue="q2")
    [claimed] = store.claim("w-1", ["q2"], 1)
    store.fail(claimed.id, claimed.lease_token, {"type": "Timeout", "message": "slow", "traceback": None})
    html = viewer.get(f"/jobs/{job.id}").text
    assert "Backoff pending after 1 failure(s)" in html and "Timeout: slow" in html


def test_why_not_running_no_live_worker_on_the_queue(viewer: ConsoleClient, store: JobStore) -> None:
    job = store.enqueue("t", {}, queue="lonely")
    assert "No live worker at all" in viewer.get(f"/jobs/{job.id}").text
    worker(store, queues=("default", "mail:3"))
    html = viewer.get(f"/jobs/{job.id}").text
    assert "No live worker serves queue &#39;lonely&#39;" in html and "default, mail" in html
    worker(store, "w-2", queues=("lonely",))
    store.enqueue("t", {}, queue="lonely")
    html = viewer.get(f"/jobs/{job.id}").text
    assert "1 live worker(s) serve &#39;lonely&#39;" in html and "Queued behind up to 1 other job" in html


def test_why_not_running_lease_of_a_silent_worker(viewer: ConsoleClient, store: JobStore) -> None:
    job = store.enqueue("t", {})
    store.claim("w-dead", ["default"], 1, lease_ttl_s=600)
    html = viewer.get(f"/jobs/{job.id}").text
    assert "Lease held by worker w-dead, which stopped heartbeating (not in the worker registry)" in html
    expire_leases(store, 601)
    assert (
        "expired" in viewer.get(f"/jobs/{job.id}").text
        and "awaits recovery" in viewer.get(f"/jobs/{job.id}").text
    )


def test_workers_page(viewer: ConsoleClient, store: JobStore) -> None:
    job = store.enqueue("t", {})
    worker(store, "w-live", jobs=[job.id])
    html = viewer.get("/workers").text
    assert "w-live" in html and "host-a" in html and "1/4" in html and job.id[-8:] in html and "alive" in html
    expire_leases(store, 3600)
    assert "silent" in viewer.get("/workers").text


def test_recovery_page_previews_lock_and_history(viewer: ConsoleClient, store: JobStore) -> None:
    retried = store.enqueue("t", {}, max_retries=2)
    spent = store.enqueue("t", {}, max_retries=0)
    store.claim("w-dead", ["default"], 2)
    expire_leases(store)
    store.acquire_lock("recovery", "worker-7", 60)
    html = viewer.get("/recovery").text
    assert retried.id[-8:] in html and spent.id[-8:] in html
    assert ">retry<" in html and ">fail<" in html
    assert "held by <code>worker-7</code>" in html
    assert "Recover stuck jobs" in html and 'id="recover-run"' not in html  # viewer: no button
    assert "No recovery run recorded yet" in html


def test_audit_page_lists_operator_actions(viewer: ConsoleClient, store: JobStore) -> None:
    job = store.enqueue("t", {})
    store.cancel(job.id, actor="operator:ann")
    store.requeue(job.id, actor="operator:bob")
    store.claim("w-1", ["default"], 1)  # a worker's event is not an operator action
    html = viewer.get("/audit").text
    assert "canceled" in html and "requeued" in html and ">ann<" in html and ">bob<" in html
    assert "claimed" not in html
    only_bob = viewer.get("/audit?actor=bob").text
    assert "requeued" in only_bob and ">canceled<" not in only_bob
