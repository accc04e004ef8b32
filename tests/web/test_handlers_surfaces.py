"""The handler catalogue shown: GET /api/handlers and the console's Handlers
page (every store), escaping what the workers published."""

# ruff: noqa: F811 - the fixtures are imported from console_fixtures and requested by name
from __future__ import annotations

import re
import uuid

from flask.testing import FlaskClient

from store.base import JobStore
from store.models import WorkerInfo, ts
from tests.store.test_contract_catalogue import NIGHTLY, SLOW
from tests.web.conftest import OPERATOR, VIEWER, api_app, api_client  # noqa: F401 - fixtures
from tests.web.console_fixtures import ConsoleClient, console_app, viewer  # noqa: F401 - fixtures

XSS = "<img src=x onerror=alert(1)>"


def _publish(store: JobStore, *handlers: dict) -> None:
    info = WorkerInfo(
        "w-1", "h", 1, ["default", "slowq"], 2, started_at=ts(store.now()), handlers=list(handlers)
    )
    store.worker_heartbeat(info)


def test_api_lists_the_handlers_live_workers_serve(api_client: FlaskClient, store: JobStore) -> None:
    assert api_client.get("/api/handlers", headers=VIEWER).json == {"items": []}
    _publish(store, SLOW, NIGHTLY)
    answer = api_client.get("/api/handlers", headers=VIEWER)
    assert answer.status_code == 200
    items = {h["name"]: h for h in answer.json["items"]}
    assert {k: v for k, v in items["slow"].items() if k != "figures"} == {**SLOW, "workers": ["w-1"]}
    assert items["nightly"]["schedule"] == "0 3 * * *"
    assert items["slow"]["figures"] == {
        "waiting": 0,
        "completed_last_hour": 0,
        "failed_last_hour": 0,
        "run_p50_s": None,
        "run_p95_s": None,
        "capped": False,
    }
    assert api_client.get("/api/handlers").status_code == 401


def test_the_handlers_page_links_each_handler_to_its_jobs(viewer: ConsoleClient, store: JobStore) -> None:
    assert "No live worker publishes its handlers yet" in viewer.get("/handlers").text
    _publish(store, SLOW, {**NIGHTLY, "name": XSS})
    html = viewer.get("/handlers").text
    assert 'href="/jobs?name=slow"' in html and 'href="/queues/slowq"' in html and "w-1" in html
    assert XSS not in html and "&lt;img src=x" in html
    assert 'data-completed="0"' in html and 'data-failed="0"' in html and "Run p50 · p95" in html
    assert 'aria-current="page"' in html and ">Handlers</a>" in html


def test_each_handlers_retry_policy_is_shown(
    api_client: FlaskClient, viewer: ConsoleClient, store: JobStore
) -> None:
    plain = {k: v for k, v in SLOW.items() if not k.startswith(("retry_", "give_up_"))}
    _publish(store, SLOW, {**plain, "name": "plain"})
    items = {h["name"]: h for h in api_client.get("/api/handlers", headers=VIEWER).json["items"]}
    slow = {k: items["slow"][k] for k in ("retry_base_s", "retry_max_delay_s", "retry_jitter")}
    assert slow == {"retry_base_s": 5.0, "retry_max_delay_s": 600.0, "retry_jitter": 0.1}
    assert (items["slow"]["retry_on"], items["slow"]["give_up_on"]) == (SLOW["retry_on"], ["ValueError"])
    assert [items["plain"][k] for k in ("retry_base_s", "retry_on", "give_up_on")] == [None, [], []]
    html = viewer.get("/handlers").text
    cells = dict(re.findall(r'<tr data-handler="([^"]+)">.*?<td data-retry-policy>(.*?)</td>', html, re.S))
    assert "5 s × 2<sup>n</sup>, at most 10.0 min, jitter 10 %" in cells["slow"]
    assert "retries only <code>TimeoutError</code>, <code>app.errors.Busy</code>" in cells["slow"]
    assert "fails at once on <code>ValueError</code>" in cells["slow"] and "(default)" not in cells["slow"]
    default = store.settings.retry  # the store's own backoff, marked as such
    assert cells["plain"].startswith(f"{default.base_s:.0f} s × 2<sup>n</sup>")
    assert "(default)" in cells["plain"]


def test_handler_figures_count_the_last_hour(api_client: FlaskClient, store: JobStore) -> None:
    _publish(store, SLOW)
    ids = [store.enqueue("slow", queue="slowq", max_retries=0).id for _ in range(4)]
    claimed = {j.id: j for j in store.claim("w-1", ["slowq"], 3)}
    store.clock_offset_s += 2  # each run takes 2 s by the store's clock
    done = [j for j in claimed.values()][:2]
    for job in done:
        store.complete(job.id, job.lease_token, {"ok": True})
    [bad] = [j for j in claimed.values() if j not in done]
    store.fail(bad.id, bad.lease_token, {"type": "E", "message": "x", "traceback": None})
    figures = api_client.get("/api/handlers", headers=VIEWER).json["items"][0]["figures"]
    assert (figures["waiting"], figures["completed_last_hour"], figures["failed_last_hour"]) == (1, 2, 1)
    assert 1.5 <= figures["run_p50_s"] <= figures["run_p95_s"] < 3
    assert len(ids) == 4
    store.clock_offset_s += 3600  # an hour later, nothing in the window
    later = api_client.get("/api/handlers", headers=VIEWER).json["items"]
    assert later == []  # and w-1 is silent by now: its handlers left the catalogue


#: Entries a worker of another version (or a bug) could publish.
MALFORMED = [
    {**SLOW, "name": "bad-ttl", "lease_ttl_s": "thirty"},
    {**SLOW, "name": "bad-retries", "max_retries": "3"},
    {**SLOW, "name": "bad-timeout", "timeout_s": -5},
    {**SLOW, "name": "bad-queue", "queue": 7},
    {**SLOW, "name": "bad-jitter", "retry_jitter": 2},
    {**SLOW, "name": "bad-retry-on", "retry_on": "KeyError"},
    {**SLOW, "name": None},
    "not an object",
]


def test_a_malformed_catalogue_entry_is_skipped_with_one_warning(
    api_client: FlaskClient, viewer: ConsoleClient, store: JobStore, caplog
) -> None:
    # A worker id of its own: warnings are once per process (worker, handler, problem).
    worker = f"w-{uuid.uuid4().hex[:8]}"
    store.worker_heartbeat(
        WorkerInfo(worker, "h", 1, ["slowq"], 2, started_at=ts(store.now()), handlers=[SLOW, *MALFORMED])
    )
    with caplog.at_level("WARNING", logger="leasehold.catalogue"):
        for _ in range(2):
            listed = api_client.get("/api/handlers", headers=VIEWER)
            assert listed.status_code == 200, listed.json
            assert [h["name"] for h in listed.json["items"]] == ["slow"]
            page = viewer.get("/handlers")
            assert page.status_code == 200 and 'href="/jobs?name=slow"' in page.text
            made = api_client.post("/api/jobs", json={"name": "slow"}, headers=OPERATOR)
            assert made.status_code == 202, made.json
            assert (made.json["queue"], made.json["max_retries"]) == ("slowq", 1)
        assert api_client.post("/api/jobs", json={"name": "bad-ttl"}, headers=OPERATOR).status_code == 422
    warned = [r.getMessage() for r in caplog.records if r.name == "leasehold.catalogue"]
    assert len(warned) == len(MALFORMED), warned  # once each, not per request
    assert any("'bad-ttl'" in m and "lease_ttl_s" in m for m in warned)
    job = store.enqueue("slow", queue="slowq")
    assert viewer.get(f"/jobs/{job.id}").status_code == 200
