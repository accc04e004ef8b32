# ruff: noqa: F811 - the fixtures are imported from console_fixtures and requested by name
"""The console's /alerts: viewers see the rules, operators create (CSRF),
test, mute and delete them; every change audited; webhooks by origin only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store.alerts import alerts, new_rule, save_new
from store.base import JobStore
from store.lifecycle import EventKind
from tests.alerts_sink import Sink, start_sink
from tests.web.console_fixtures import (  # noqa: F401 - fixtures
    ConsoleClient,
    console_app,
    operator,
    viewer,
)


@pytest.fixture
def sink() -> Iterator[Sink]:
    server, s = start_sink(Sink())
    yield s
    server.shutdown()
    server.server_close()


def test_operator_creates_tests_mutes_and_deletes(
    operator: ConsoleClient, store: JobStore, sink: Sink
) -> None:
    page = operator.get("/alerts")
    assert page.status_code == 200 and "No alert rule yet" in page.text and 'name="webhook"' in page.text
    form = {"name": "mail", "when": "job_failed", "queue": "mail", "webhook": sink.url, "secret": "k3y"}
    assert operator.post("/alerts", form, csrf=False).status_code == 400  # no CSRF token
    created = operator.post("/alerts", form)
    assert created.status_code == 303
    [rule] = alerts(store)
    shown = operator.get("/alerts").text
    assert "mail" in shown and sink.url.split("/hook")[0] + "/…" in shown
    assert "s3cr3t-path" not in shown and "k3y" not in shown
    tested = operator.post(f"/alerts/{rule.id}/test", htmx=True)
    assert tested.status_code == 200 and "delivered (HTTP 200)" in tested.text
    assert sink.got[0].body["details"] == {"test": True}
    muted = operator.post(f"/alerts/{rule.id}/mute", {"for_s": "3600"}, htmx=True)
    assert "muted until" in muted.text and "Unmute" in muted.text
    assert operator.post(f"/alerts/{rule.id}/delete", htmx=True).status_code == 200
    assert alerts(store) == []
    entries = [e for e in store.audit() if e.kind == EventKind.ALERT_CHANGED]
    assert len(entries) == 4 and {e.actor for e in entries} == {"operator:ann"}


def test_a_bad_form_is_422_naming_the_field(operator: ConsoleClient, store: JobStore) -> None:
    form = {"name": "x", "when": "queue_latency", "webhook": "https://example.org/h", "secret": "k3y"}
    answer = operator.post("/alerts", form)
    assert answer.status_code == 422 and "threshold: is required by queue_latency" in answer.text
    assert "k3y" not in answer.text and alerts(store) == []


def test_viewers_see_but_cannot_act(viewer: ConsoleClient, store: JobStore, sink: Sink) -> None:
    rule = save_new(
        store, new_rule({"name": "mail", "when": "job_failed", "webhook": sink.url}, "operator:ann")
    )
    page = viewer.get("/alerts")
    assert page.status_code == 200 and "mail" in page.text
    assert 'name="webhook"' not in page.text and "Delete" not in page.text
    assert viewer.post("/alerts", {"name": "y", "when": "job_failed", "webhook": sink.url}).status_code == 403
    for action in ("test", "mute", "delete"):
        assert viewer.post(f"/alerts/{rule.id}/{action}", {"for_s": "60"}).status_code == 403
    assert sink.got == [] and len(alerts(store)) == 1
