"""History graphs on the overview and queue pages: a known workload, put
through the store, shows in each graph's table (every store)."""

# ruff: noqa: F811 - the fixtures are imported from console_fixtures and requested by name
from __future__ import annotations

import re

from store.base import JobStore
from tests.web.console_fixtures import (  # noqa: F401 - fixtures
    ConsoleClient,
    console_app,
    viewer,
)


def totals(html: str) -> dict[str, int]:
    """Each graph table's total row, by series key."""
    return {k: int(v) for k, v in re.findall(r'data-total="(\w+)">(\d+)<', html)}


def workload(store: JobStore) -> None:
    """7 enqueued on "mail" (4 completed, 1 failed for good), 2 on "other"."""
    store.enqueue_many([("send", {"i": i}, "mail") for i in range(7)])
    store.enqueue_many([("t", {"i": i}, "other") for i in range(2)])
    jobs = store.claim("w-1", ["mail"], 5)
    for job in jobs[:4]:
        store.complete(job.id, job.lease_token, {"ok": True})
    last = jobs[4]
    store.fail(last.id, last.lease_token, {"type": "E", "message": "m", "traceback": None}, permanent=True)


def test_overview_graph_tables_show_a_known_workload(viewer: ConsoleClient, store: JobStore) -> None:
    workload(store)
    expected = {"completed": 4, "enqueued": 9, "failed": 1, "lease_expired": 0, "retried": 0}
    for rng in ("1h", "24h", "7d"):
        html = viewer.get(f"/?range={rng}").text
        assert totals(html) == expected, rng
        assert f'data-range="{rng}" aria-current="true"' in html
        assert f"range={rng}" in re.search(r'id="overview-live"[^>]*hx-get="([^"]+)"', html).group(1)
    html = viewer.get("/", htmx=True).text
    assert html.lstrip().startswith('<div id="overview-live"') and totals(html) == expected
    assert 'role="img" aria-label="Throughput: completed 4, enqueued 9' in html
    # 12 five-minute rows, zero-filled, the newest holding the whole workload.
    [table] = re.findall(r'id="graph-throughput".*?<tbody>(.*?)</tbody>', html, re.S)
    rows = re.findall(
        r"<tr><th scope=\"row\">[^<]+</th><td class=\"num\">(\d+)</td><td class=\"num\">(\d+)</td>", table
    )
    assert len(rows) == 12 and rows[0] == ("4", "9") and all(r == ("0", "0") for r in rows[1:])


def test_queue_page_graphs_count_that_queue_only(viewer: ConsoleClient, store: JobStore) -> None:
    workload(store)
    assert totals(viewer.get("/queues/mail?range=24h").text) == {
        "completed": 4, "enqueued": 7, "failed": 1, "lease_expired": 0, "retried": 0,
    }  # fmt: skip
    assert totals(viewer.get("/queues/other", htmx=True).text)["enqueued"] == 2
    assert totals(viewer.get("/queues/empty").text) == dict.fromkeys(
        ("completed", "enqueued", "failed", "lease_expired", "retried"), 0
    )
