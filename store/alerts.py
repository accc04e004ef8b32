"""Alert rules: what operators ask to be told about, kept in the store over
the record port (store/ports.py) like bulk operations and schedules, so no
engine needs a table or a script of its own (docs/architecture.md, "Alerts").

A rule (``AlertRule``) names a condition (``when``, one of WHEN):

* ``job_failed``: a job of ``queue`` and/or ``handler`` (or any) failed for good;
* ``failure_rate``: over the last ``window_s`` seconds, the share of finished
  jobs of ``queue`` (or of every queue) that failed is above ``threshold``
  (a fraction in (0, 1]);
* ``queue_latency``: the oldest Queued job of ``queue`` (or of any queue) has
  waited more than ``threshold`` seconds;
* ``no_workers``: no live worker serves ``queue`` (or, without a queue, some
  queue holding Queued jobs);

and a webhook: ``https://…``, or ``http://`` to a loopback or private address
(an internal relay, a test sink), with an optional HMAC ``secret``. Record
kind ``alert``, key the rule's id, scored by creation; besides the rule the
record keeps its state, written by the one evaluator holding the ``alerts``
lock (store/alerts_eval.py): ``firing`` and ``notified`` (the firing was
handed to delivery), ``since`` (job_failed: failures after this store time
are new), ``fired`` and ``deliveries_failed`` (totals, for /metrics),
``last_fired_at``; and the operators' ``muted_until``.
"""

from __future__ import annotations

import ipaddress
import math
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from store.errors import StoreError, ValidationError
from store.ports import MAX_PAGE, Change, Record, RecordPort
from store.spec import MAX_NAME_LEN, MAX_QUEUE_LEN, scrub_nul
from store.times import iso, ts

ALERT = "alert"
#: The conditions a rule can watch.
WHEN = ("job_failed", "failure_rate", "queue_latency", "no_workers")
#: Longest rule name and webhook URL, characters.
MAX_ALERT_NAME_LEN = 100
MAX_WEBHOOK_LEN = 2000
MAX_SECRET_LEN = 200
#: Bounds of ``window_s`` (failure_rate), seconds: a minute (the history's
#: narrowest bucket) to a day.
MIN_WINDOW_S = 60.0
MAX_WINDOW_S = 86400.0
DEFAULT_WINDOW_S = 900.0
#: Longest mute, seconds (30 days).
MAX_MUTE_S = 30 * 86400.0
#: Most rules a store keeps.
MAX_ALERTS = 500
#: Fields the evaluator writes (an operator's change never touches them).
STATE_FIELDS = ("firing", "notified", "since", "last_fired_at")


class AlertNotFound(StoreError):
    """No alert rule has that id."""

    def __init__(self, alert_id: str) -> None:
        super().__init__(f"alert {alert_id} not found")
        self.alert_id = alert_id


@dataclass(frozen=True, slots=True)
class AlertRule:
    """A stored rule and its state (see the module's docstring). Times are
    epoch seconds of the store's clock; ``secret`` is never shown."""

    id: str
    name: str
    when: str
    webhook: str
    queue: str | None = None
    handler: str | None = None
    threshold: float | None = None
    window_s: float | None = None
    secret: str | None = None
    created_by: str = "operator"
    created_at: float | None = None
    muted_until: float | None = None
    firing: bool = False
    notified: bool = False
    since: float | None = None
    fired: int = 0
    deliveries_failed: int = 0
    last_fired_at: float | None = None

    def muted(self, now: float) -> bool:
        return self.muted_until is not None and now < self.muted_until

    def to_json(self, now: float | None = None) -> dict[str, Any]:
        """The rule as the API and the console show it: the webhook reduced to
        its origin (``shown_webhook``), ``secret_set`` instead of the secret."""
        return {
            "id": self.id,
            "name": self.name,
            "when": self.when,
            "queue": self.queue,
            "handler": self.handler,
            "threshold": self.threshold,
            "window_s": self.window_s,
            "webhook": shown_webhook(self.webhook),
            "secret_set": bool(self.secret),
            "created_by": self.created_by,
            "created_at": iso(ts(self.created_at)),
            "muted_until": iso(ts(self.muted_until)),
            "muted": self.muted(now) if now is not None else self.muted_until is not None,
            "firing": self.firing,
            "fired": self.fired,
            "deliveries_failed": self.deliveries_failed,
            "last_fired_at": iso(ts(self.last_fired_at)),
        }


def rule_from(record: Record) -> AlertRule:
    """An ``alert`` record as an AlertRule."""
    v = record.value
    return AlertRule(
        id=record.key,
        name=v["name"],
        when=v["when"],
        webhook=v["webhook"],
        queue=v.get("queue"),
        handler=v.get("handler"),
        threshold=v.get("threshold"),
        window_s=v.get("window_s"),
        secret=v.get("secret"),
        created_by=v.get("created_by", "operator"),
        created_at=v.get("created_at"),
        muted_until=v.get("muted_until"),
        firing=bool(v.get("firing")),
        notified=bool(v.get("notified")),
        since=v.get("since"),
        fired=int(v.get("fired") or 0),
        deliveries_failed=int(v.get("deliveries_failed") or 0),
        last_fired_at=v.get("last_fired_at"),
    )


# ------------------------------------------------------------------ webhook
def _plain_http_allowed(host: str) -> bool:
    """Plain http only to this machine or a private network: ``localhost``,
    a loopback or private IP literal (a name is not resolved: its address
    could change after the check)."""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private


def check_webhook(url: Any) -> str:
    """``url`` if it is a webhook Leasehold posts to: ``https://host…``, or
    ``http://`` to a host ``_plain_http_allowed`` accepts. Raises
    ValidationError naming ``webhook``."""
    if not isinstance(url, str) or not url or len(url) > MAX_WEBHOOK_LEN:
        raise ValidationError("webhook", f"must be a URL of at most {MAX_WEBHOOK_LEN} characters")
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018 (raises ValueError for a bad port)
    except ValueError as exc:
        raise ValidationError("webhook", f"is not a valid URL ({exc})") from None
    if any(c.isspace() or ord(c) < 32 for c in url) or not host:
        raise ValidationError("webhook", "must be an absolute URL with a host")
    if parts.scheme == "https":
        return url
    if parts.scheme == "http" and _plain_http_allowed(host):
        return url
    raise ValidationError(
        "webhook", "must be https:// (plain http:// only to localhost or a loopback or private address)"
    )


def shown_webhook(url: str) -> str:
    """What is shown of a webhook: its scheme, host and port, then ``/…``
    when it has more (a path or query often holds a token; credentials are
    never shown)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    origin = f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")
    rest = (parts.path not in ("", "/")) or parts.query or parts.fragment
    return origin + ("/…" if rest else "/")


# --------------------------------------------------------------- validation
def _text(fld: str, value: Any, longest: int, *, required: bool = False) -> str | None:
    if value is None or value == "":
        if required:
            raise ValidationError(fld, "is required")
        return None
    if not isinstance(value, str) or len(value) > longest or not value.strip():
        raise ValidationError(fld, f"must be a non-blank string of at most {longest} characters")
    return scrub_nul(value)


def _number(fld: str, value: Any, low: float, high: float, *, low_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError(fld, "must be a number")
    if value > high or value < low or (low_open and value == low):
        bracket = "(" if low_open else "["
        raise ValidationError(fld, f"must be within {bracket}{low:g}, {high:g}]")
    return float(value)


def new_rule(body: dict[str, Any], actor: str) -> AlertRule:
    """A rule from the fields of ``POST /api/alerts`` (``name``, ``when``,
    ``queue``, ``handler``, ``threshold``, ``window_s``, ``webhook``,
    ``secret``), checked: ``threshold`` is required by failure_rate (a
    fraction in (0, 1]) and queue_latency (seconds, > 0) and refused by the
    others; ``window_s`` only with failure_rate ([60, 86400] s, default 900);
    ``handler`` only with job_failed. Raises ValidationError naming the field."""
    unknown = set(body) - {"name", "when", "queue", "handler", "threshold", "window_s", "webhook", "secret"}
    if unknown:
        raise ValidationError(sorted(unknown)[0], "is not a field of an alert")
    name = _text("name", body.get("name"), MAX_ALERT_NAME_LEN, required=True)
    when = body.get("when")
    if when not in WHEN:
        raise ValidationError("when", f"must be one of {', '.join(WHEN)}")
    queue = _text("queue", body.get("queue"), MAX_QUEUE_LEN)
    handler = _text("handler", body.get("handler"), MAX_NAME_LEN)
    if handler is not None and when != "job_failed":
        raise ValidationError("handler", "is only taken by job_failed")
    threshold: float | None = None
    if when in ("failure_rate", "queue_latency"):
        if body.get("threshold") is None:
            raise ValidationError("threshold", f"is required by {when}")
        high = 1.0 if when == "failure_rate" else MAX_WINDOW_S * 30
        threshold = _number("threshold", body["threshold"], 0.0, high, low_open=True)
    elif body.get("threshold") is not None:
        raise ValidationError("threshold", f"is not taken by {when}")
    window_s: float | None = None
    if when == "failure_rate":
        raw = body.get("window_s")
        window_s = DEFAULT_WINDOW_S if raw is None else _number("window_s", raw, MIN_WINDOW_S, MAX_WINDOW_S)
    elif body.get("window_s") is not None:
        raise ValidationError("window_s", "is only taken by failure_rate")
    webhook = check_webhook(body.get("webhook"))
    secret = _text("secret", body.get("secret"), MAX_SECRET_LEN)
    return AlertRule(
        id=uuid.uuid4().hex,
        name=str(name),
        when=when,
        webhook=webhook,
        queue=queue,
        handler=handler,
        threshold=threshold,
        window_s=window_s,
        secret=secret,
        created_by=actor,
    )


# ------------------------------------------------------------------ storage
def alerts(store: RecordPort) -> list[AlertRule]:
    """Every rule, newest first."""
    return [rule_from(r) for r in store.record_page(ALERT, min(MAX_ALERTS, MAX_PAGE))]


def get_alert(store: RecordPort, alert_id: str) -> AlertRule:
    """One rule. Raises AlertNotFound."""
    record = store.record_get(ALERT, alert_id) if _is_id(alert_id) else None
    if record is None:
        raise AlertNotFound(alert_id)
    return rule_from(record)


def _is_id(alert_id: str) -> bool:
    return isinstance(alert_id, str) and 0 < len(alert_id) <= 64 and alert_id.isalnum()


def save_new(store: RecordPort, rule: AlertRule) -> AlertRule:
    """Store a rule made by ``new_rule``: ``created_at`` and ``since`` (failures
    before it are not news) the store's clock. Raises ValidationError when
    MAX_ALERTS rules exist already."""
    if len(store.record_page(ALERT, MAX_ALERTS)) >= MAX_ALERTS:
        raise ValidationError("name", f"at most {MAX_ALERTS} alert rules are kept; delete one first")
    value = {
        "name": rule.name,
        "when": rule.when,
        "webhook": rule.webhook,
        "queue": rule.queue,
        "handler": rule.handler,
        "threshold": rule.threshold,
        "window_s": rule.window_s,
        "secret": rule.secret,
        "created_by": rule.created_by,
        "firing": False,
        "notified": False,
        "fired": 0,
        "deliveries_failed": 0,
    }
    change = Change(init=value, stamp_new=("created_at", "since"), score_field="created_at")
    record, _ = store.record_change(ALERT, rule.id, change)
    assert record is not None  # created when absent
    return rule_from(record)


def delete_alert(store: RecordPort, alert_id: str) -> AlertRule:
    """Remove a rule; the rule as it was. Raises AlertNotFound."""
    rule = get_alert(store, alert_id)
    store.record_drop(ALERT, alert_id)
    return rule


def mute_alert(store: RecordPort, alert_id: str, for_s: float, now: float) -> AlertRule:
    """Mute a rule for ``for_s`` seconds from ``now`` (the store's clock); 0
    unmutes. A firing while muted is not delivered; one still holding when
    the mute ends is. Raises AlertNotFound, ValidationError (``for_s``)."""
    seconds = _number("for_s", for_s, 0.0, MAX_MUTE_S)
    change = (
        Change(set={"muted_until": now + seconds}, create=False)
        if seconds > 0
        else Change(drop=("muted_until",), create=False)
    )
    record, _ = store.record_change(ALERT, alert_id, change) if _is_id(alert_id) else (None, False)
    if record is None:
        raise AlertNotFound(alert_id)
    return rule_from(record)


def set_state(store: RecordPort, alert_id: str, state: dict[str, Any], *, fired: bool = False) -> None:
    """The evaluator's write of a rule's state (``STATE_FIELDS``; ``fired``
    adds one to the total). A rule deleted meanwhile stays deleted."""
    drop = tuple(k for k, v in state.items() if v is None)
    values = {k: v for k, v in state.items() if v is not None}
    change = Change(set=values, drop=drop, add={"fired": 1} if fired else {}, create=False)
    store.record_change(ALERT, alert_id, change)


def count_failed_delivery(store: RecordPort, alert_id: str) -> None:
    """Add one to a rule's ``deliveries_failed`` (a firing given up on)."""
    store.record_change(ALERT, alert_id, Change(add={"deliveries_failed": 1}, create=False))
