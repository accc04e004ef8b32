"""``leasehold alerts list|add|delete|test|mute``: the alert rules
(store/alerts.py) from the command line. Changes are recorded in the audit
log as ``operator:cli:<login>``; webhooks are shown by origin, secrets never.
Bad input exits non-zero with one line (``Error: …``)."""

from __future__ import annotations

import json

import click

from leasehold.cli.base import OneLineGroup, friendly_errors, operator, runtime
from store.alerts import WHEN, alerts, delete_alert, get_alert, mute_alert, new_rule, save_new


@click.group("alerts", cls=OneLineGroup)
def alerts_group() -> None:
    """Alert rules: a webhook told when jobs fail, queues wait or lose their workers."""


@alerts_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the rules as JSON.")
@friendly_errors
def alerts_list(as_json: bool) -> None:
    """Every rule, newest first."""
    store = runtime().store()
    now = store.now()
    rows = [rule.to_json(now) for rule in alerts(store)]
    if as_json:
        click.echo(json.dumps({"items": rows}, indent=2))
        return
    if not rows:
        click.echo("no alert rules")
    for r in rows:
        where = " ".join(
            f"{k}={r[k]}" for k in ("queue", "handler", "threshold", "window_s") if r[k] is not None
        )
        state = "FIRING" if r["firing"] else "ok"
        muted = f" muted until {r['muted_until']}" if r["muted"] else ""
        click.echo(f"{r['id']}  {r['name']}  {r['when']} {where}  -> {r['webhook']}  {state}{muted}")


@alerts_group.command("add")
@click.argument("name")
@click.option("--when", "when", type=click.Choice(WHEN), required=True, help="The condition.")
@click.option("--webhook", required=True, help="https://… (http:// only to localhost or a private address).")
@click.option("--queue", default=None, help="Only this queue.")
@click.option("--handler", default=None, help="Only this handler (job_failed).")
@click.option("--threshold", type=float, default=None, help="failure_rate: fraction; queue_latency: seconds.")
@click.option("--window", "window_s", type=float, default=None, help="failure_rate: seconds (default 900).")
@click.option("--secret", default=None, help="HMAC key for the signature.")
@friendly_errors
def alerts_add(name: str, when: str, webhook: str, **options: object) -> None:
    """Create a rule; prints its id."""
    from store.alerts_delivery import audit  # urllib3 only for the commands that post or audit

    store = runtime().store()
    body = {
        "name": name,
        "when": when,
        "webhook": webhook,
        **{k: v for k, v in options.items() if v is not None},
    }
    rule = save_new(store, new_rule(body, operator()))
    audit(store, operator(), rule, f"created: when {rule.when}, webhook {rule.to_json()['webhook']}")
    click.echo(rule.id)


@alerts_group.command("delete")
@click.argument("alert_id")
@friendly_errors
def alerts_delete(alert_id: str) -> None:
    """Delete a rule."""
    from store.alerts_delivery import audit

    store = runtime().store()
    rule = delete_alert(store, alert_id)
    audit(store, operator(), rule, "deleted")
    click.echo(f"alert {rule.name} deleted")


@alerts_group.command("test")
@click.argument("alert_id")
@friendly_errors
def alerts_test(alert_id: str) -> None:
    """Send a test firing to the rule's webhook now; exits 1 when it was not delivered."""
    from store.alerts_delivery import send_test

    store = runtime().store()
    attempt = send_test(store, get_alert(store, alert_id), operator())
    if not attempt.delivered:
        raise click.ClickException(f"not delivered: {attempt.error}")
    click.echo(f"delivered (HTTP {attempt.status})")


@alerts_group.command("mute")
@click.argument("alert_id")
@click.option("--for", "for_s", type=float, required=True, help="Seconds; 0 unmutes.")
@friendly_errors
def alerts_mute(alert_id: str, for_s: float) -> None:
    """Mute a rule for a while (its firings are not sent meanwhile)."""
    from store.alerts_delivery import audit

    store = runtime().store()
    rule = mute_alert(store, alert_id, for_s, store.now())
    audit(store, operator(), rule, f"muted for {for_s:g} s" if for_s else "unmuted")
    click.echo(
        f"alert {rule.name} " + (f"muted until {rule.to_json()['muted_until']}" if for_s else "unmuted")
    )
