"""Alerts on every store: rules kept over the record port, evaluated by the
maintenance service under the store's lock, firings delivered once to a real
webhook (an HTTP server on a loopback port), signed, deduplicated while the
condition holds, held back while muted, retried and counted when the
webhook is down, never in the way of jobs."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Iterator

import pytest

from store.alerts import get_alert, mute_alert, new_rule, save_new
from store.alerts_delivery import Deliverer
from store.alerts_eval import evaluate
from store.base import JobStore
from store.errors import ValidationError
from store.lifecycle import JobStatus
from tests.alerts_sink import Sink, start_sink
from workers.services import MaintenanceService

#: How often the service under test evaluates the rules, seconds.
PASS_S = 0.2
#: Longest wait for something one pass does, seconds (a pass plus slack for a busy machine).
WITHIN_S = PASS_S + 5.0


@pytest.fixture
def sink() -> Iterator[Sink]:
    server, s = start_sink(Sink())
    yield s
    server.shutdown()
    server.server_close()


def wait_until(check: Callable[[], bool], timeout_s: float = WITHIN_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def fail_for_good(store: JobStore, queue: str) -> str:
    job = store.enqueue("send-mail", {"to": "a@example.org"}, queue=queue, max_retries=0)
    [claimed] = store.claim("w-1", [queue])
    store.fail(claimed.id, claimed.lease_token, {"type": "SMTPError", "message": "550", "traceback": None})
    assert store.get(job.id).status is JobStatus.Failed
    return job.id


def service_on(store: JobStore) -> MaintenanceService:
    service = MaintenanceService(store, "w-alerts", 3600.0, {}, 3600.0, audit_retention_s=0)
    service.alert_interval_s = PASS_S
    service.start()
    return service


def test_a_job_failed_for_good_is_one_signed_alert_none_while_muted_one_after(
    store: JobStore, sink: Sink
) -> None:
    body = {"name": "mail fails", "when": "job_failed", "queue": "mail", "webhook": sink.url, "secret": "k3y"}
    rule = save_new(store, new_rule(body, "operator:ann"))
    service = service_on(store)
    try:
        job_id = fail_for_good(store, "mail")
        [got] = sink.wait_for(1, WITHIN_S)
        expected = "sha256=" + hmac.new(b"k3y", got.raw, hashlib.sha256).hexdigest()
        assert got.headers["X-Leasehold-Signature"] == expected
        assert set(got.body) == {"alert", "when", "fired_at", "summary", "details", "url"}
        assert got.body["alert"] == "mail fails" and got.body["when"] == "job_failed"
        assert got.body["details"]["jobs"][0]["id"] == job_id and got.body["url"] == f"/jobs/{job_id}"
        wait_until(lambda: not get_alert(store, rule.id).firing)  # a later pass saw no new failure
        assert len(sink.got) == 1
        fail_for_good(store, "other")  # another queue: not this rule's
        mute_alert(store, rule.id, 3600, store.now())
        fail_for_good(store, "mail")
        wait_until(lambda: get_alert(store, rule.id).fired == 2)  # it fired, muted
        wait_until(lambda: not get_alert(store, rule.id).firing)
        assert len(sink.got) == 1
        mute_alert(store, rule.id, 0, store.now())
        again = fail_for_good(store, "mail")
        got = sink.wait_for(2, WITHIN_S)
        assert len(got) == 2 and got[1].body["url"] == f"/jobs/{again}"
        assert get_alert(store, rule.id).fired == 3
    finally:
        service.stop()
        service.join(timeout=10)


def test_queue_latency_fires_clears_and_a_muted_firing_is_sent_when_the_mute_ends(
    store: JobStore, sink: Sink
) -> None:
    body = {"name": "slow", "when": "queue_latency", "queue": "slow", "threshold": 30, "webhook": sink.url}
    rule = save_new(store, new_rule(body, "operator:ann"))
    deliverer = Deliverer(store, attempts=1)
    store.enqueue("work", {}, queue="slow")
    assert evaluate(store, "me") == []  # waited 0 s so far
    store.clock_offset_s += 60
    [firing] = evaluate(store, "me")
    assert deliverer.deliver(firing)
    assert sink.got[0].body["details"]["latency_s"]["slow"] >= 60
    assert "X-Leasehold-Signature" not in sink.got[0].headers  # no secret, no signature
    assert evaluate(store, "me") == []  # still holds: deduplicated
    store.claim("w-1", ["slow"])
    assert evaluate(store, "me") == [] and not get_alert(store, rule.id).firing  # cleared
    mute_alert(store, rule.id, 600, store.now())
    store.enqueue("work", {}, queue="slow")
    store.clock_offset_s += 60
    assert evaluate(store, "me") == [] and get_alert(store, rule.id).firing  # held back
    mute_alert(store, rule.id, 0, store.now())
    [held] = evaluate(store, "me")
    assert held.rule.id == rule.id and evaluate(store, "me") == []
    assert get_alert(store, rule.id).fired == 2


def test_a_dead_webhook_is_retried_and_counted_and_jobs_never_wait(store: JobStore, sink: Sink) -> None:
    sink.status, sink.delay_s = 503, 0.5
    rule = save_new(store, new_rule({"name": "x", "when": "job_failed", "webhook": sink.url}, "operator:ann"))
    service = MaintenanceService(store, "w-alerts", 3600.0, {}, 3600.0, audit_retention_s=0)
    service.deliverer = Deliverer(store, attempts=3, backoff_s=0.05)
    try:
        fail_for_good(store, "default")
        t0 = time.monotonic()
        assert service.tick_alerts() == 1
        assert time.monotonic() - t0 < sink.delay_s  # evaluation never waits for the webhook
        sink.wait_for(1, WITHIN_S)
        t0 = time.monotonic()  # the webhook is answering slowly now: jobs run on regardless
        for n in range(10):
            job = store.enqueue("work", {"n": n})
            [claimed] = store.claim("w-1", ["default"])
            store.complete(claimed.id, claimed.lease_token, {"ok": True})
            assert store.get(job.id).status is JobStatus.Completed
        assert time.monotonic() - t0 < sink.delay_s * 3
        wait_until(lambda: get_alert(store, rule.id).deliveries_failed == 1, 3 * (sink.delay_s + 5))
        assert len(sink.got) == 3  # three attempts, then given up and counted
    finally:
        service.stop()


def test_one_evaluator_at_a_time(store: JobStore, sink: Sink) -> None:
    save_new(store, new_rule({"name": "x", "when": "job_failed", "webhook": sink.url}, "operator:ann"))
    assert store.acquire_lock("alerts", "someone-else", 30)
    assert evaluate(store, "me") is None  # another instance holds the lock
    store.release_lock("alerts", "someone-else")
    fail_for_good(store, "default")
    assert len(evaluate(store, "me") or []) == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"when": "job_failed", "webhook": "http://example.org/x"}, "webhook"),
        ({"when": "job_failed", "webhook": "ftp://127.0.0.1/x"}, "webhook"),
        ({"when": "queue_latency", "webhook": "https://example.org/x"}, "threshold"),
        ({"when": "failure_rate", "threshold": 1.5, "webhook": "https://example.org/x"}, "threshold"),
        ({"when": "no_workers", "handler": "h", "webhook": "https://example.org/x"}, "handler"),
        ({"when": "sometimes", "webhook": "https://example.org/x"}, "when"),
    ],
)
def test_bad_rules_are_refused_naming_the_field(store: JobStore, body: dict, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        new_rule({"name": "n", **body}, "operator:ann")
    assert caught.value.field == field


def test_failure_rate_and_no_workers_hold_and_clear(store: JobStore, sink: Sink) -> None:
    rate = {"name": "r", "when": "failure_rate", "threshold": 0.4, "window_s": 600, "webhook": sink.url}
    save_new(store, new_rule(rate, "operator:ann"))
    save_new(store, new_rule({"name": "w", "when": "no_workers", "webhook": sink.url}, "operator:ann"))
    fail_for_good(store, "default")
    names = sorted(f.rule.name for f in evaluate(store, "me") or [])
    assert names == ["r"]  # 1 of 1 failed; no Queued job: no_workers watches nothing
    job = store.enqueue("work", {})
    [fired] = evaluate(store, "me") or []
    assert fired.rule.name == "w" and fired.body["details"]["queues"] == ["default"]
    store.cancel(job.id)
    assert evaluate(store, "me") == []
