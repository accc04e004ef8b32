"""API views of the alert rules (store/alerts.py): list, create, delete,
test and mute. Registered by ``webapp.api.routes`` (``route_table``); GET
needs a viewer token, every change an operator's, and every change is
recorded in the audit log (EventKind.ALERT_CHANGED) with the token's actor.
Webhooks are shown by their origin only and secrets never (``AlertRule.to_json``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from flask import Response
from pydantic import BaseModel, ConfigDict, Field, RootModel

from store.alerts import (
    MAX_MUTE_S,
    AlertNotFound,
    AlertRule,
    alerts,
    delete_alert,
    get_alert,
    mute_alert,
    new_rule,
    save_new,
)
from store.alerts_delivery import audit, send_test
from webapp.api.auth import current_token
from webapp.api.common import context_of
from webapp.api.errors import APIError
from webapp.api.schemas import DateTime
from webapp.api.state import job_store

ALERT = "/api/alerts/<alert_id>"


#: A webhook the store takes (``store.alerts.check_webhook``): https to any
#: host, plain http to localhost or a loopback or private IPv4 address.
WEBHOOK_PATTERN = (
    r"^(https://([A-Za-z0-9._~%!$&'()*+,;=:-]+@)?[A-Za-z0-9.-]+"
    r"|http://([A-Za-z0-9._~%!$&'()*+,;=:-]+@)?(localhost|127(\.(0|[1-9][0-9]?)){3}|10(\.(0|[1-9][0-9]?)){3}"
    r"|192\.168(\.(0|[1-9][0-9]?)){2}|172\.(1[6-9]|2[0-9]|3[01])(\.(0|[1-9][0-9]?)){2}))"
    r"(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?(/[!-~]*)?$"
)
#: Text with a visible character and no control character (NUL included), as the store's rule.
_TEXT = r"^[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f][^\x00-\x1f\x7f]*$"


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=100, pattern=_TEXT)
    queue: str | None = Field(None, min_length=1, max_length=100, pattern=_TEXT)
    webhook: str = Field(
        max_length=2000,
        pattern=WEBHOOK_PATTERN,
        description="https://…, or http:// to localhost or a loopback or private address",
    )
    secret: str | None = Field(
        None, min_length=1, max_length=200, pattern=_TEXT, description="signs each body (HMAC-SHA256)"
    )


class JobFailedRule(_Rule):
    """A job of the queue and/or handler (or any) failed for good."""

    when: Literal["job_failed"]
    handler: str | None = Field(None, min_length=1, max_length=200, pattern=_TEXT)


class FailureRateRule(_Rule):
    """The share of finished jobs that failed over the window is above the threshold."""

    when: Literal["failure_rate"]
    threshold: float = Field(gt=0.0, le=1.0, allow_inf_nan=False, description="a fraction")
    window_s: float = Field(900.0, ge=60.0, le=86400.0, allow_inf_nan=False)


class QueueLatencyRule(_Rule):
    """The oldest Queued job has waited more than ``threshold`` seconds."""

    when: Literal["queue_latency"]
    threshold: float = Field(gt=0.0, le=2592000.0, allow_inf_nan=False, description="seconds")


class NoWorkersRule(_Rule):
    """No live worker serves the queue (or a queue holding Queued jobs)."""

    when: Literal["no_workers"]


AlertRequest = RootModel[
    Annotated[JobFailedRule | FailureRateRule | QueueLatencyRule | NoWorkersRule, Field(discriminator="when")]
]


class MuteQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    for_s: float = Field(ge=0.0, le=MAX_MUTE_S, allow_inf_nan=False, description="seconds; 0 unmutes")


class AlertOut(BaseModel):
    id: str
    name: str
    when: str
    queue: str | None
    handler: str | None
    threshold: float | None
    window_s: float | None
    webhook: str = Field(description="the webhook's origin only")
    secret_set: bool
    created_by: str
    created_at: DateTime | None
    muted_until: DateTime | None
    muted: bool
    firing: bool
    fired: int = Field(description="firings so far")
    deliveries_failed: int = Field(description="firings whose delivery was given up")
    last_fired_at: DateTime | None


class AlertList(BaseModel):
    items: list[AlertOut]


class AlertTestOut(BaseModel):
    delivered: bool
    status: int | None = Field(description="the webhook's HTTP status, null without an answer")
    error: str | None


def _rule(alert_id: str) -> AlertRule:
    try:
        return get_alert(job_store(), alert_id)
    except AlertNotFound as exc:
        raise APIError(404, str(exc)) from None


# ------------------------------------------------------------------ views
def list_alerts() -> dict[str, Any]:
    """Every alert rule, newest first, with its state (firing, muted, totals)."""
    store = job_store()
    now = store.now()
    return {"items": [rule.to_json(now) for rule in alerts(store)]}


def create_alert() -> tuple[dict[str, Any], int, dict[str, str]]:
    """Create a rule: 201 with it and `Location`; 422 naming a bad field.
    Evaluated by the workers' maintenance from its next pass on."""
    body: AlertRequest = context_of("json", AlertRequest)
    store = job_store()
    actor = current_token().actor
    rule = save_new(store, new_rule(body.root.model_dump(exclude_none=True), actor))
    audit(store, actor, rule, f"created: when {rule.when}, webhook {rule.to_json()['webhook']}")
    return rule.to_json(store.now()), 201, {"Location": f"/api/alerts/{rule.id}"}


def remove_alert(alert_id: str) -> Response:
    """Delete a rule: 204; 404 when unknown."""
    store = job_store()
    try:
        rule = delete_alert(store, alert_id)
    except AlertNotFound as exc:
        raise APIError(404, str(exc)) from None
    audit(store, current_token().actor, rule, "deleted")
    return Response(status=204)


def send_test_alert(alert_id: str) -> dict[str, Any]:
    """Send a test firing to the rule's webhook now, once (a short timeout,
    no redirect followed): whether it was delivered, the HTTP status, why not."""
    rule = _rule(alert_id)
    attempt = send_test(job_store(), rule, current_token().actor)
    return {"delivered": attempt.delivered, "status": attempt.status, "error": attempt.error}


def mute_alert_rule(alert_id: str) -> dict[str, Any]:
    """Mute a rule for `for_s` seconds (0 unmutes): its firings are not sent
    meanwhile; one still holding when the mute ends is sent then."""
    q: MuteQuery = context_of("query", MuteQuery)
    store = job_store()
    rule = _rule(alert_id)
    try:
        rule = mute_alert(store, rule.id, q.for_s, store.now())
    except AlertNotFound as exc:
        raise APIError(404, str(exc)) from None
    audit(store, current_token().actor, rule, f"muted for {q.for_s:g} s" if q.for_s else "unmuted")
    return rule.to_json(store.now())


def route_table(route: Callable[..., Any], read: dict[str, Any], act: dict[str, Any], body: dict[str, Any]):
    """The routes of this module, built with ``webapp.api.routes.Route``."""
    e = act["HTTP_404"]
    tags = ("alerts",)
    return (
        route("/api/alerts", list_alerts, responses={"HTTP_200": AlertList, **read}, tags=tags),
        route(
            "/api/alerts",
            create_alert,
            ("POST",),
            json=AlertRequest,
            responses={"HTTP_201": AlertOut, "HTTP_422": e, **act, **body},
            tags=tags,
        ),
        route(ALERT, remove_alert, ("DELETE",), responses={"HTTP_204": None, **act}, tags=tags),
        route(
            f"{ALERT}/test",
            send_test_alert,
            ("POST",),
            responses={"HTTP_200": AlertTestOut, **act},
            tags=tags,
        ),
        route(
            f"{ALERT}/mute",
            mute_alert_rule,
            ("POST",),
            query=MuteQuery,
            responses={"HTTP_200": AlertOut, "HTTP_422": e, **act},
            tags=tags,
        ),
    )
