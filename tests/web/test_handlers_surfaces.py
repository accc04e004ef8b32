"""The handler catalogue shown: GET /api/handlers and the console's Handlers
page (every store), escaping what the workers published."""

# ruff: noqa: F811 - the fixtures are imported from console_fixtures and requested by name
from __future__ import annotations

from flask.testing import FlaskClient

from store.base import JobStore
from store.models import WorkerInfo, ts
from tests.store.test_contract_catalogue import NIGHTLY, SLOW
from tests.web.conftest import VIEWER, api_app, api_client  # noqa: F401 - fixtures
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
    assert items["slow"] == {**SLOW, "workers": ["w-1"]}
    assert items["nightly"]["schedule"] == "0 3 * * *"
    assert api_client.get("/api/handlers").status_code == 401


def test_the_handlers_page_links_each_handler_to_its_jobs(viewer: ConsoleClient, store: JobStore) -> None:
    assert "No live worker publishes its handlers yet" in viewer.get("/handlers").text
    _publish(store, SLOW, {**NIGHTLY, "name": XSS})
    html = viewer.get("/handlers").text
    assert 'href="/jobs?name=slow"' in html and 'href="/queues/slowq"' in html and "w-1" in html
    assert XSS not in html and "&lt;img src=x" in html
    assert 'aria-current="page"' in html and ">Handlers</a>" in html
