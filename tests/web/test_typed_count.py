""" "Type the count" is checked against the server's own count at
confirmation, never the count the form sends back; the operation and its
audit entry record the server's count (every store)."""

from __future__ import annotations

import re

import pytest

from store.lifecycle import EventKind
from tests.backends import StoreHandle
from tests.web.conftest import OPERATOR, api_app_for
from tests.web.console_fixtures import ConsoleClient, confirm_form, console_app_for
from webapp import operations


@pytest.fixture
def small_confirm(monkeypatch: pytest.MonkeyPatch) -> int:
    """Ask for the typed count above 2 jobs (the rule, not the size, is under test)."""
    monkeypatch.setattr(operations, "CONFIRM_ABOVE", 2)
    return 2


def _operator(handle: StoreHandle) -> ConsoleClient:
    client = ConsoleClient(console_app_for(handle).test_client())
    assert client.login("ann").status_code == 303
    return client


def test_a_forged_expected_does_not_skip_the_typed_count(handle: StoreHandle, small_confirm: int) -> None:
    store = handle.store
    for _ in range(5):
        store.enqueue("t", {}, queue="big")
    operator = _operator(handle)
    form = {"action": "delete", "queue": "big"}
    preview = operator.post("/jobs/bulk", form, htmx=True)
    for forged in ("0", "1", "2"):  # at or under the threshold: the old check asked for nothing
        refused = operator.post(
            "/jobs/bulk", {**confirm_form(preview.text, form), "expected": forged}, htmx=True
        )
        assert refused.status_code == 422
        assert "Type the number of jobs, 5, to confirm" in refused.text
        assert 'name="typed"' in refused.text  # the confirm form again
    assert store.operations() == []


def test_the_typed_count_must_match_the_current_count(handle: StoreHandle, small_confirm: int) -> None:
    store = handle.store
    for _ in range(4):
        store.enqueue("t", {}, queue="big")
    operator = _operator(handle)
    form = {"action": "cancel", "queue": "big"}
    preview = operator.post("/jobs/bulk", form, htmx=True)
    assert "Type <strong>4</strong> to confirm" in preview.text
    store.enqueue("t", {}, queue="big")  # the count moved since the preview
    stale = operator.post("/jobs/bulk", {**confirm_form(preview.text, form), "typed": "4"}, htmx=True)
    assert stale.status_code == 422
    assert "Type the number of jobs, 5," in stale.text and "Type <strong>5</strong> to confirm" in stale.text
    again = operator.post("/jobs/bulk", {**confirm_form(stale.text, form), "typed": "5"}, htmx=True)
    assert again.status_code == 200 and again.headers["HX-Redirect"].startswith("/operations/")
    [op] = store.operations()
    assert op.expected == 5
    [started] = [e for e in store.audit() if e.kind == EventKind.BULK_STARTED]
    assert started.message.startswith("cancel of 5 jobs")


def test_a_small_action_records_the_recount_not_the_form(handle: StoreHandle) -> None:
    store = handle.store
    for _ in range(3):
        store.enqueue("t", {}, queue="q")
    operator = _operator(handle)
    form = {"action": "cancel", "queue": "q"}
    preview = operator.post("/jobs/bulk", form, htmx=True)
    done = operator.post("/jobs/bulk", {**confirm_form(preview.text, form), "expected": "0"}, htmx=True)
    assert done.status_code == 200
    [op] = store.operations()
    assert op.expected == 3
    [started] = [e for e in store.audit() if e.kind == EventKind.BULK_STARTED]
    assert re.match(r"cancel of 3 jobs", started.message)


def test_api_expected_is_checked_against_the_servers_count(handle: StoreHandle, small_confirm: int) -> None:
    store = handle.store
    for _ in range(4):
        store.enqueue("t", {}, queue="big")
    client = api_app_for(handle).test_client()
    body = {"action": "delete", "filter": {"queue": "big"}, "expected": 0}
    refused = client.post("/api/operations", json=body, headers=OPERATOR)
    assert refused.status_code == 409 and "4 jobs" in refused.json["error"]["message"]
    assert store.operations() == []
    started = client.post("/api/operations", json={**body, "expected": 4}, headers=OPERATOR)
    assert started.status_code == 202 and started.json["expected"] == 4
    [entry] = [e for e in store.audit() if e.kind == EventKind.BULK_STARTED]
    assert entry.message.startswith("delete of 4 jobs")
