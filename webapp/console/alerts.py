"""The console's Alerts page (``/alerts``): the rules with their state,
and for operators a form to create one, and mute, test and delete buttons.

Actions are POSTs (CSRF-checked by the blueprint), operators only, made with
the store's actor ``operator:<name>`` and audited (EventKind.ALERT_CHANGED),
like the API's (webapp/api/alerts.py). An htmx request gets the page's
fragment back; a plain form post is redirected (post/redirect/get). A bad
form is answered 422 with the page and the field's message.
"""

from __future__ import annotations

from typing import Any

from flask import Response, abort, flash, redirect, request, url_for

from store.alerts import WHEN, AlertNotFound, alerts, delete_alert, get_alert, mute_alert, new_rule, save_new
from store.alerts_delivery import audit, send_test
from store.errors import ValidationError
from webapp.console import auth
from webapp.console.actions import actor
from webapp.console.blueprint import bp, is_htmx, render_view, store

#: Mute choices of the console (seconds, label).
MUTE_CHOICES = ((3600, "1 h"), (86400, "1 day"))
#: The form's optional fields and how each is read.
_NUMBERS = ("threshold", "window_s")
_TEXTS = ("queue", "handler", "secret")


def alerts_context(message: str | None = None, error: str | None = None, form: Any = None) -> dict[str, Any]:
    st = store()
    now = st.now()
    return {
        "rules": [rule.to_json(now) for rule in alerts(st)],
        "whens": WHEN,
        "mute_choices": MUTE_CHOICES,
        "message": message,
        "error": error,
        "form": form or {},
    }


@bp.get("/alerts")
def alerts_page() -> Response:
    return render_view("alerts.html", "partials/alerts_table.html", **alerts_context())


def _done(message: str) -> Response:
    if is_htmx():
        return render_view("alerts.html", "partials/alerts_table.html", **alerts_context(message))
    flash(message)
    return redirect(url_for("console.alerts_page"), 303)


def _body(form: Any) -> dict[str, Any]:
    """The rule's fields from the form (blank fields left out). Raises
    ValidationError for a number that is not one."""
    body: dict[str, Any] = {k: form.get(k, "").strip() for k in ("name", "when", "webhook")}
    for name in _TEXTS:
        if value := form.get(name, "").strip():
            body[name] = value
    for name in _NUMBERS:
        if raw := form.get(name, "").strip():
            try:
                body[name] = float(raw)
            except ValueError:
                raise ValidationError(name, "must be a number") from None
    return body


@bp.post("/alerts")
@auth.operator_required
def alerts_create() -> Response:
    st = store()
    try:
        rule = save_new(st, new_rule(_body(request.form), actor()))
    except ValidationError as exc:
        shown = {k: v for k, v in request.form.items() if k not in ("secret", "csrf_token")}
        context = alerts_context(error=str(exc), form=shown)
        return render_view("alerts.html", "partials/alerts_table.html", status=422, **context)
    audit(st, actor(), rule, f"created: when {rule.when}, webhook {rule.to_json()['webhook']}")
    return _done(f"Alert {rule.name} created.")


def _rule_or_404(alert_id: str) -> Any:
    try:
        return get_alert(store(), alert_id)
    except AlertNotFound:
        abort(404, "No alert rule has that id.")


@bp.post("/alerts/<alert_id>/delete")
@auth.operator_required
def alerts_delete(alert_id: str) -> Response:
    rule = _rule_or_404(alert_id)
    delete_alert(store(), rule.id)
    audit(store(), actor(), rule, "deleted")
    return _done(f"Alert {rule.name} deleted.")


@bp.post("/alerts/<alert_id>/test")
@auth.operator_required
def alerts_test(alert_id: str) -> Response:
    rule = _rule_or_404(alert_id)
    attempt = send_test(store(), rule, actor())
    outcome = f"delivered (HTTP {attempt.status})" if attempt.delivered else f"not delivered: {attempt.error}"
    return _done(f"Test of alert {rule.name}: {outcome}.")


@bp.post("/alerts/<alert_id>/mute")
@auth.operator_required
def alerts_mute(alert_id: str) -> Response:
    rule = _rule_or_404(alert_id)
    try:
        for_s = float(request.form.get("for_s", ""))
        rule = mute_alert(store(), rule.id, for_s, store().now())
    except (ValueError, ValidationError):
        abort(400, "for_s must be a number of seconds (0 unmutes).")
    audit(store(), actor(), rule, f"muted for {for_s:g} s" if for_s else "unmuted")
    return _done(f"Alert {rule.name} " + ("muted." if for_s else "unmuted."))
