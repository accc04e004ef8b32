"""Delivery of alert firings to their webhooks (docs/architecture.md, "Alerts").

A firing is POSTed as JSON (``store.alerts_eval.body_of``) with urllib3: a
short timeout (TIMEOUT_S for connect and read), redirects never followed (a
3xx is a failed attempt), ``X-Leasehold-Signature: sha256=<hex HMAC-SHA256 of
the body with the rule's secret>`` when the rule has one. Any 2xx answer is a
delivery.

``Deliverer`` is a thread with a bounded queue: ``submit`` never blocks (a
full queue drops the firing, counted as a failed delivery), so evaluating
rules, and the jobs of the worker that runs it, never wait for a webhook. It
tries each firing up to ``attempts`` times, waiting ``backoff_s * 2**n``
between tries; a firing given up on adds one to the rule's
``deliveries_failed`` (``leasehold_alert_deliveries_failed_total``). A
firing in the queue when its worker stops is lost (delivery is at most once).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import queue
import threading
from dataclasses import dataclass
from typing import Any

import orjson
import urllib3

from store.alerts import AlertRule, count_failed_delivery, shown_webhook
from store.alerts_eval import Firing
from store.base import JobStore
from store.lifecycle import EventKind
from store.ports import RecordPort
from store.times import iso, ts

log = logging.getLogger(__name__)

#: Seconds to connect, and then to read the answer, per attempt.
TIMEOUT_S = 5.0
#: Tries per firing, and the first wait between two (doubled each time), seconds.
ATTEMPTS = 4
BACKOFF_S = 1.0
#: Firings waiting for delivery at most (more are dropped and counted failed).
QUEUE_SIZE = 100
SIGNATURE_HEADER = "X-Leasehold-Signature"

_POOL = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(connect=TIMEOUT_S, read=TIMEOUT_S))


def signature(secret: str, body: bytes) -> str:
    """``sha256=<hex>``: the HMAC-SHA256 of ``body`` keyed by ``secret``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class Attempt:
    """One POST: ``status`` the HTTP status (None when none came back) and
    ``error`` why it is not a delivery (None when it is)."""

    status: int | None
    error: str | None

    @property
    def delivered(self) -> bool:
        return self.error is None


def post(rule: AlertRule, body: dict[str, Any], timeout_s: float = TIMEOUT_S) -> Attempt:
    """POST ``body`` to ``rule``'s webhook once; never raises for the
    network or the answer (both come back as the Attempt's ``error``)."""
    data = orjson.dumps(body)
    headers = {"Content-Type": "application/json", "User-Agent": "leasehold-alerts"}
    if rule.secret:
        headers[SIGNATURE_HEADER] = signature(rule.secret, data)
    try:
        answer = _POOL.request(
            "POST",
            rule.webhook,
            body=data,
            headers=headers,
            redirect=False,
            retries=False,
            timeout=urllib3.Timeout(connect=timeout_s, read=timeout_s),
        )
    except urllib3.exceptions.HTTPError as exc:
        return Attempt(None, f"{type(exc).__name__}: {_reason(exc)}")
    if 200 <= answer.status < 300:
        return Attempt(answer.status, None)
    return Attempt(answer.status, f"HTTP {answer.status} from {shown_webhook(rule.webhook)}")


def _reason(exc: Exception) -> str:
    """Why a POST failed, without the webhook's URL (its path may hold a token)."""
    return str(getattr(exc, "reason", None) or exc).split(" url: ")[0][:200]


def audit(store: JobStore, actor: str, rule: AlertRule, what: str) -> None:
    """Record an operator's change of ``rule`` in the audit log."""
    store.record_action(actor, EventKind.ALERT_CHANGED, f"alert {rule.name}", what)


def send_test(store: JobStore, rule: AlertRule, actor: str) -> Attempt:
    """POST a test firing to ``rule``'s webhook now (once, no retry) and
    audit it; the attempt."""
    body = {
        "alert": rule.name,
        "when": rule.when,
        "fired_at": iso(ts(store.now())),
        "summary": f"test of alert {rule.name}, sent by {actor}",
        "details": {"test": True},
        "url": "/alerts",
    }
    attempt = post(rule, body)
    audit(
        store, actor, rule, "tested: " + ("delivered" if attempt.delivered else f"failed ({attempt.error})")
    )
    return attempt


class Deliverer(threading.Thread):
    """Delivers firings off the caller's thread (see the module's docstring).
    ``store`` counts the failed deliveries; ``sleep`` is the stop event's
    wait, so ``stop`` ends a backoff at once."""

    def __init__(
        self,
        store: RecordPort,
        attempts: int = ATTEMPTS,
        backoff_s: float = BACKOFF_S,
        timeout_s: float = TIMEOUT_S,
        size: int = QUEUE_SIZE,
    ) -> None:
        super().__init__(name="leasehold-alerts", daemon=True)
        self.store = store
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self._queue: queue.Queue[Firing | None] = queue.Queue(maxsize=size)
        self._stop_event = threading.Event()

    def submit(self, firing: Firing) -> bool:
        """Queue a firing; False (counted as a failed delivery) when the queue is full."""
        try:
            self._queue.put_nowait(firing)
            return True
        except queue.Full:
            log.warning("alert %s: delivery queue full, firing dropped", firing.rule.name)
            self._count_failed(firing.rule)
            return False

    def stop(self) -> None:
        self._stop_event.set()
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(None)

    def deliver(self, firing: Firing) -> bool:
        """Try one firing up to ``attempts`` times; True when delivered."""
        rule = firing.rule
        for n in range(self.attempts):
            if n and self._stop_event.wait(self.backoff_s * 2 ** (n - 1)):
                break
            attempt = post(rule, firing.body, self.timeout_s)
            if attempt.delivered:
                log.info("alert %s delivered to %s", rule.name, shown_webhook(rule.webhook))
                return True
            log.warning("alert %s: delivery attempt %d failed: %s", rule.name, n + 1, attempt.error)
        self._count_failed(rule)
        return False

    def _count_failed(self, rule: AlertRule) -> None:
        try:
            count_failed_delivery(self.store, rule.id)
        except Exception as exc:  # a count is not worth the thread
            log.warning("alert %s: failed delivery not counted: %s", rule.name, exc)

    def run(self) -> None:
        while not self._stop_event.is_set():
            firing = self._queue.get()
            if firing is None:
                break
            try:
                self.deliver(firing)
            except Exception:  # never lose the thread
                log.exception("alert %s: delivery failed", firing.rule.name)
