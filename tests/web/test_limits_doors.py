"""Queue limits at the web's doors, by the one rule of ``store.flow_rules``: the
API answers 422 naming the field (never a 500) for values past the bounds,
non-integers and queue names enqueue refuses; the console's form answers
with the form and the field named; and a stored value that no longer passes
the rule is reported for its own queue and breaks no other queue's GET or
PUT, ``/metrics`` or the queue page."""

# ruff: noqa: F811 - the fixtures are imported from console_fixtures and requested by name
from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from store.base import JobStore
from store.flow_rules import QueueLimits, Rate
from tests.backends import StoreHandle
from tests.conftest import handle_fixture
from tests.store.test_contract_limit_values import write_bad_limits
from tests.web.conftest import OPERATOR, VIEWER
from tests.web.console_fixtures import (  # noqa: F401 - fixtures
    ConsoleClient,
    console_app,
    operator,
)

handle = handle_fixture(["sqlite", "postgresql", "redis"])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"concurrency": 99999999999}, "concurrency"),
        ({"concurrency": 1_000_001}, "concurrency"),
        ({"concurrency": 2.5}, "concurrency"),
        ({"per_key_concurrency": "²"}, "per_key_concurrency"),
        ({"rate": {"limit": 99999999999, "period_s": 1}}, "rate.limit"),
        ({"rate": {"limit": 1, "period_s": 1e300}}, "rate.period_s"),
        ({"per_key_rate": {"limit": 1, "period_s": 0}}, "per_key_rate.period_s"),
        ({"per_key_rate": {"limit": 1, "period_s": "1"}}, "per_key_rate.period_s"),
    ],
)
def test_api_refuses_limits_past_the_rule_naming_the_field(
    api_client: FlaskClient, store: JobStore, body: dict, field: str
) -> None:
    response = api_client.put("/api/queues/mail/limits", json=body, headers=OPERATOR)
    assert response.status_code == 422, response.json
    assert response.json["error"]["field"] == field
    assert store.queue_limits() == {}


def test_api_answers_huge_numbers_without_a_500(api_client: FlaskClient, store: JobStore) -> None:
    for raw in ('{"concurrency": 99999999999999999999999}', '{"concurrency": ' + "9" * 5000 + "}"):
        response = api_client.put(
            "/api/queues/mail/limits", data=raw, content_type="application/json", headers=OPERATOR
        )
        assert response.status_code in (400, 422), response.json  # beyond 64 bits: not JSON we read
    assert store.queue_limits() == {}


def test_api_refuses_a_queue_name_enqueue_refuses(api_client: FlaskClient, store: JobStore) -> None:
    for path in ("/api/queues/a%00b/limits", f"/api/queues/{'q' * 101}/limits"):
        put = api_client.put(path, json={"concurrency": 1}, headers=OPERATOR)
        assert put.status_code == 422 and put.json["error"]["field"] == "queue", put.json
        get = api_client.get(path, headers=VIEWER)
        assert get.status_code == 422 and get.json["error"]["field"] == "queue"
    assert store.queue_limits() == {}


def test_a_bad_stored_value_breaks_no_other_queue_nor_metrics(
    handle: StoreHandle, api_client: FlaskClient, operator: ConsoleClient
) -> None:
    store = handle.store
    store.set_queue_limits("good", QueueLimits(concurrency=2))
    write_bad_limits(handle, "bad")
    got = api_client.get("/api/queues/good/limits", headers=VIEWER)
    assert got.status_code == 200 and got.json["concurrency"] == 2 and got.json["invalid"] is None
    put = api_client.put("/api/queues/other/limits", json={"concurrency": 4}, headers=OPERATOR)
    assert put.status_code == 200 and put.json["concurrency"] == 4
    bad = api_client.get("/api/queues/bad/limits", headers=VIEWER)
    assert bad.status_code == 200, bad.json
    assert bad.json["concurrency"] is None and bad.json["rate"] == {"limit": 5, "period_s": 60.0}
    assert bad.json["invalid"].startswith("concurrency: must be within")

    metrics = api_client.get("/metrics", headers=VIEWER)
    assert metrics.status_code == 200
    assert 'leasehold_queue_limits_invalid{queue="bad"} 1.0' in metrics.text
    assert 'leasehold_queue_limit{kind="concurrency",queue="good"} 2.0' in metrics.text
    assert 'leasehold_queue_limit{kind="rate",queue="bad"} 5.0' in metrics.text

    page = operator.get("/queues/bad")
    assert page.status_code == 200 and 'id="limits-invalid"' in page.text
    assert operator.get("/queues/good").status_code == 200
    # A PUT of the bad queue replaces what was stored.
    fixed = api_client.put("/api/queues/bad/limits", json={"concurrency": 1}, headers=OPERATOR)
    assert fixed.status_code == 200 and fixed.json["invalid"] is None
    assert store.queue_limits()["bad"] == QueueLimits(concurrency=1, rate=Rate(5, 60.0))


@pytest.mark.parametrize(
    ("form", "field"),
    [
        ({"concurrency": "²"}, "concurrency"),
        ({"concurrency": "9" * 5000}, "concurrency"),
        ({"concurrency": "99999999999999999999999"}, "concurrency"),
        ({"concurrency": "99999999999"}, "concurrency"),
        ({"per_key_concurrency": "-1"}, "per_key_concurrency"),
        ({"rate": "99999999999/1"}, "rate"),
        ({"rate": "5/1e999"}, "rate"),
        ({"per_key_rate": "5/0"}, "per_key_rate"),
    ],
)
def test_the_console_form_refuses_values_past_the_rule(
    operator: ConsoleClient, store: JobStore, form: dict[str, str], field: str
) -> None:
    done = operator.post("/queues/mail/limits", form)
    assert done.status_code == 422
    assert 'id="limits-error"' in done.text and f"Limits not changed: {field}" in done.text
    htmx = operator.post("/queues/mail/limits", form, htmx=True)
    assert htmx.status_code == 422 and htmx.text.lstrip().startswith('<details id="limits-editor" open>')
    assert store.queue_limits() == {}
    assert operator.get("/queues/mail").status_code == 200


def test_the_console_refuses_a_queue_name_with_nul(operator: ConsoleClient, store: JobStore) -> None:
    done = operator.post("/queues/a%00b/limits", {"concurrency": "1"})
    assert done.status_code == 422 and "Limits not changed: queue:" in done.text
    assert store.queue_limits() == {}
