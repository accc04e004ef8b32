"""Enqueueing a periodic job now is idempotent: the API honours
Idempotency-Key as POST /api/jobs does, and the console's form carries a
nonce, so a retried request or a double click makes one job (every store)."""

from __future__ import annotations

import re

from store.lifecycle import EventKind
from store.models import Schedule
from tests.backends import StoreHandle
from tests.web.conftest import OPERATOR, api_app_for
from tests.web.console_fixtures import ConsoleClient, console_app_for

NIGHTLY = Schedule("nightly", "report", "0 3 * * *", "UTC", "reports", {"full": True})
HOURLY = Schedule("hourly", "ping", "0 * * * *", "UTC", "default", {})


def _runs(store) -> int:
    return sum(1 for e in store.audit() if e.kind == EventKind.SCHEDULE_RUN)


def test_api_run_now_honours_idempotency_key(handle: StoreHandle) -> None:
    store = handle.store
    store.save_schedules([NIGHTLY, HOURLY])
    client = api_app_for(handle).test_client()
    key = {**OPERATOR, "Idempotency-Key": "nightly-now-1"}
    first = client.post("/api/periodic/nightly/run", headers=key)
    again = client.post("/api/periodic/nightly/run", headers=key)
    assert (first.status_code, again.status_code) == (202, 202)
    assert first.json["id"] == again.json["id"]
    assert again.headers["Location"] == first.headers["Location"]
    assert len(store.list_jobs(queue="reports").items) == 1
    assert _runs(store) == 1  # the replay wrote nothing
    # The key used for another schedule is refused; no key, a new job each time.
    other = client.post("/api/periodic/hourly/run", headers=key)
    assert other.status_code == 422 and other.json["error"]["field"] == "Idempotency-Key"
    assert client.post("/api/periodic/nightly/run", headers=OPERATOR).json["id"] != first.json["id"]
    assert len(store.list_jobs(queue="reports").items) == 2
    bad = client.post("/api/periodic/nightly/run", headers={**OPERATOR, "Idempotency-Key": "é"})
    assert bad.status_code == 422


def test_openapi_documents_the_key_on_run_now(handle: StoreHandle) -> None:
    doc = api_app_for(handle).test_client().get("/openapi.json", headers=OPERATOR).json
    params = doc["paths"]["/api/periodic/{name}/run"]["post"].get("parameters", [])
    assert any(p["name"] == "Idempotency-Key" for p in params)


def test_console_double_click_makes_one_job(handle: StoreHandle) -> None:
    store = handle.store
    store.save_schedules([NIGHTLY])
    operator = ConsoleClient(console_app_for(handle).test_client())
    assert operator.login("ann").status_code == 303
    page = operator.get("/periodic").text
    nonce = re.search(r'name="nonce" value="([0-9a-f]{32})"', page)
    assert nonce, "the Enqueue now form carries a nonce"
    form = {"nonce": nonce.group(1)}
    first = operator.post("/periodic/nightly/run", form, htmx=True)
    second = operator.post("/periodic/nightly/run", form, htmx=True)
    assert first.status_code == second.status_code == 200
    [job] = store.list_jobs(queue="reports").items
    assert (
        "Enqueued report now" in first.text
        and f"Already enqueued by this form: report ({job.id})" in second.text
    )
    assert _runs(store) == 1
    # The page re-rendered after the action carries a new nonce: the next click is a new job.
    fresh = re.search(r'name="nonce" value="([0-9a-f]{32})"', second.text)
    assert fresh and fresh.group(1) != nonce.group(1)
    operator.post("/periodic/nightly/run", {"nonce": fresh.group(1)}, htmx=True)
    assert len(store.list_jobs(queue="reports").items) == 2


def test_a_schedule_whose_name_holds_a_slash_is_enabled_disabled_and_run(handle: StoreHandle) -> None:
    store = handle.store
    store.save_schedules([Schedule("reports/daily", "report", "0 3 * * *", "UTC", "reports", {})])
    api = api_app_for(handle).test_client()
    assert api.post("/api/periodic/reports/daily/disable", headers=OPERATOR).json["enabled"] is False
    assert api.post("/api/periodic/reports/daily/enable", headers=OPERATOR).json["enabled"] is True
    run = api.post("/api/periodic/reports/daily/run", headers=OPERATOR)
    assert run.status_code == 202, run.json
    console = ConsoleClient(console_app_for(handle).test_client())
    assert console.login("ann").status_code == 303
    page = console.get("/periodic").text
    assert 'action="/periodic/reports/daily/disable"' in page
    assert console.post("/periodic/reports/daily/disable").status_code == 303
    assert [s.enabled for s in store.schedules() if s.name == "reports/daily"] == [False]
    nonce = re.search(r'name="nonce" value="([0-9a-f]{32})"', page)
    assert nonce
    done = console.post("/periodic/reports/daily/run", {"nonce": nonce.group(1)})
    assert done.status_code == 303
    assert len(store.list_jobs(queue="reports").items) == 2
