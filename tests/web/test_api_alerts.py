"""The alerts API: operators create, mute, test and delete rules (audited),
viewers list them; webhooks are shown by origin, secrets never; /metrics
counts firings and failed deliveries."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask.testing import FlaskClient

from store.alerts_delivery import Deliverer
from store.alerts_eval import evaluate
from store.base import JobStore
from store.lifecycle import EventKind
from tests.alerts_sink import Sink, start_sink
from tests.store.test_contract_alerts import fail_for_good
from tests.web.conftest import OPERATOR, VIEWER


@pytest.fixture
def sink() -> Iterator[Sink]:
    server, s = start_sink(Sink())
    yield s
    server.shutdown()
    server.server_close()


def _rule(sink: Sink, **extra: object) -> dict[str, object]:
    return {"name": "mail", "when": "job_failed", "webhook": sink.url, "secret": "k3y", **extra}


def test_create_list_mute_test_delete_audited(api_client: FlaskClient, store: JobStore, sink: Sink) -> None:
    created = api_client.post("/api/alerts", json=_rule(sink, queue="mail"), headers=OPERATOR)
    assert created.status_code == 201, created.json
    rule = created.json
    assert created.headers["Location"] == f"/api/alerts/{rule['id']}"
    assert rule["webhook"] == sink.url.split("/hook")[0] + "/…"  # the path (a token, often) is not shown
    assert rule["secret_set"] is True and "secret" not in rule and "k3y" not in created.get_data(as_text=True)
    listed = api_client.get("/api/alerts", headers=VIEWER)
    assert [r["id"] for r in listed.json["items"]] == [rule["id"]]
    assert "s3cr3t-path" not in listed.get_data(as_text=True)
    muted = api_client.post(f"/api/alerts/{rule['id']}/mute?for_s=600", headers=OPERATOR)
    assert muted.status_code == 200 and muted.json["muted"] is True
    assert api_client.post(f"/api/alerts/{rule['id']}/mute?for_s=-1", headers=OPERATOR).status_code == 422
    tried = api_client.post(f"/api/alerts/{rule['id']}/test", headers=OPERATOR)
    assert tried.status_code == 200 and tried.json == {"delivered": True, "status": 200, "error": None}
    [got] = sink.got
    assert got.body["details"] == {"test": True} and got.headers["X-Leasehold-Signature"].startswith(
        "sha256="
    )
    assert api_client.delete(f"/api/alerts/{rule['id']}", headers=OPERATOR).status_code == 204
    assert api_client.delete(f"/api/alerts/{rule['id']}", headers=OPERATOR).status_code == 404
    messages = [e.message for e in store.audit() if e.kind == EventKind.ALERT_CHANGED]
    assert len(messages) == 4 and all(m.startswith("alert mail: ") for m in messages)
    assert all(e.actor == "operator:alice" for e in store.audit() if e.kind == EventKind.ALERT_CHANGED)
    assert not any("s3cr3t-path" in m or "k3y" in m for m in messages)


def test_viewers_cannot_change_rules(api_client: FlaskClient, sink: Sink) -> None:
    assert api_client.post("/api/alerts", json=_rule(sink), headers=VIEWER).status_code == 403
    rule = api_client.post("/api/alerts", json=_rule(sink), headers=OPERATOR).json
    for path in (f"/api/alerts/{rule['id']}/mute?for_s=5", f"/api/alerts/{rule['id']}/test"):
        assert api_client.post(path, headers=VIEWER).status_code == 403
    assert api_client.delete(f"/api/alerts/{rule['id']}", headers=VIEWER).status_code == 403
    assert sink.got == []


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"webhook": "http://example.org/hook"}, "webhook"),
        ({"when": "queue_latency"}, "threshold"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_rules_are_422_naming_the_field(
    api_client: FlaskClient, sink: Sink, extra: dict[str, object], field: str
) -> None:
    response = api_client.post("/api/alerts", json=_rule(sink, **extra), headers=OPERATOR)
    assert response.status_code == 422
    assert field in response.json["error"]["message"].split(":")[0]


def test_a_redirect_is_not_followed_and_the_test_says_so(api_client: FlaskClient, sink: Sink) -> None:
    sink.status, sink.location = 302, "http://127.0.0.1:9/elsewhere"
    rule = api_client.post("/api/alerts", json=_rule(sink), headers=OPERATOR).json
    tried = api_client.post(f"/api/alerts/{rule['id']}/test", headers=OPERATOR).json
    assert tried["delivered"] is False and tried["status"] == 302 and len(sink.got) == 1


def test_metrics_count_firings_and_failed_deliveries(
    api_client: FlaskClient, store: JobStore, sink: Sink
) -> None:
    sink.status = 500
    api_client.post("/api/alerts", json=_rule(sink), headers=OPERATOR)
    fail_for_good(store, "default")
    [firing] = evaluate(store, "test") or []
    assert not Deliverer(store, attempts=2, backoff_s=0.01).deliver(firing)
    text = api_client.get("/metrics", headers=VIEWER).get_data(as_text=True)
    assert 'leasehold_alerts_fired_total{alert="mail"} 1.0' in text
    assert 'leasehold_alert_deliveries_failed_total{alert="mail"} 1.0' in text
    assert 'leasehold_queue_workers{queue="default"} 0.0' in text
