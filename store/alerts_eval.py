"""Evaluation of the alert rules (store/alerts.py): run by the workers'
maintenance service (workers/services.py) under the store's lock ``alerts``,
so however many workers run, one evaluates at a time and each firing is
handed to delivery once (docs/architecture.md, "Alerts").

Per rule, one pass decides whether its condition holds now (``check``) and
moves its state:

* clear -> holds: the rule starts firing (``firing``; ``fired`` +1); unless
  it is muted the firing is delivered (``notified``);
* holds -> holds: nothing new is sent (deduplicated while it holds), except a
  firing not delivered yet because the rule was muted, sent once the mute
  has ended;
* holds -> clear: ``firing`` off; the next time it holds fires again.

``job_failed`` holds during a pass that finds jobs failed for good since the
previous pass (the rule's ``since``, moved to the newest failure seen), so a
burst of failures over consecutive passes is one firing. ``evaluate`` returns
the firings to deliver; it never posts anything itself.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from store.alerts import AlertRule, alerts, set_state
from store.base import JobStore
from store.catalogue import is_live
from store.latency import queue_latency
from store.lifecycle import EventKind, JobStatus
from store.maintenance import MaintenanceBusy, RunLock
from store.times import iso, ts

log = logging.getLogger(__name__)

#: The evaluators' lock and its task name.
ALERTS_LOCK = "alerts"
#: Lease of the lock, seconds (a pass takes milliseconds; this bounds a crash).
LOCK_TTL_S = 60.0
#: Failed jobs one job_failed pass reads at most (the firing names the first ones).
FAILED_SAMPLE = 100
#: Job ids a job_failed firing lists at most.
DETAIL_IDS = 20
#: The history's bucket width read by failure_rate, seconds.
RATE_BUCKET_S = 60


@dataclass(frozen=True, slots=True)
class Condition:
    """What a check found: ``holds``, a one-line ``summary``, ``details`` (a
    JSON object), the console ``url`` (a path) most about it, and ``state``
    (fields of the rule's record to write besides the firing state)."""

    holds: bool
    summary: str = ""
    details: dict[str, Any] | None = None
    url: str = "/alerts"
    state: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Firing:
    """One firing to deliver: the rule (its webhook and secret) and the JSON body."""

    rule: AlertRule
    body: dict[str, Any]


def _where(rule: AlertRule) -> str:
    parts = [f"queue {rule.queue}" if rule.queue else "", f"handler {rule.handler}" if rule.handler else ""]
    return " and ".join(p for p in parts if p) or "any queue"


def _job_failed(store: JobStore, rule: AlertRule, now: float) -> Condition:
    since = rule.since if rule.since is not None else now
    page = store.list_jobs(status=JobStatus.Failed, queue=rule.queue, name=rule.handler, limit=FAILED_SAMPLE)
    new = [j for j in page.items if j.last_updated_at is not None and j.last_updated_at.timestamp() > since]
    if not new:
        return Condition(False)
    newest = max(j.last_updated_at.timestamp() for j in new if j.last_updated_at is not None)
    more = "+" if len(new) == FAILED_SAMPLE else ""
    first = new[0]
    error = (first.error or {}).get("type") if isinstance(first.error, dict) else None
    return Condition(
        True,
        summary=f"{len(new)}{more} job(s) failed for good on {_where(rule)}"
        + (f" (latest: {first.name}, {error})" if error else f" (latest: {first.name})"),
        details={
            "count": len(new),
            "jobs": [{"id": j.id, "name": j.name, "queue": j.queue} for j in new[:DETAIL_IDS]],
        },
        url=f"/jobs/{first.id}",
        state={"since": newest},
    )


def _failure_rate(store: JobStore, rule: AlertRule, now: float) -> Condition:
    window_s = float(rule.window_s or 0)
    start = now - window_s
    history = store.history(RATE_BUCKET_S, start - start % RATE_BUCKET_S, rule.queue)
    failed = sum(history.get(EventKind.FAILED.value, {}).values())
    completed = sum(history.get(EventKind.COMPLETED.value, {}).values())
    finished = failed + completed
    rate = failed / finished if finished else 0.0
    threshold = float(rule.threshold or 0)
    return Condition(
        failed > 0 and rate > threshold,
        summary=f"{rate:.0%} of jobs failed on {_where(rule)} over {window_s:g} s "
        f"({failed} of {finished}; threshold {threshold:.0%})",
        details={"failed": failed, "completed": completed, "rate": round(rate, 4), "window_s": window_s},
        url=f"/queues/{rule.queue}" if rule.queue else "/jobs?status=Failed",
    )


def _queue_latency(store: JobStore, rule: AlertRule, _now: float) -> Condition:
    latency = queue_latency(store)
    threshold = float(rule.threshold or 0)
    over = {q: s for q, s in latency.items() if s > threshold and (rule.queue is None or q == rule.queue)}
    if not over:
        return Condition(False)
    worst = max(over, key=lambda q: over[q])
    return Condition(
        True,
        summary=f"queue {worst}'s oldest job has waited {over[worst]:.0f} s (threshold {threshold:g} s)",
        details={"latency_s": {q: round(s, 3) for q, s in sorted(over.items())}, "threshold_s": threshold},
        url=f"/queues/{worst}",
    )


def _no_workers(store: JobStore, rule: AlertRule, now: float) -> Condition:
    served = {
        q for w in store.workers() if is_live(w, now, store.settings.lease_ttl_s) for q in w.queues or []
    }
    if rule.queue is not None:
        watched = {rule.queue}
    else:
        watched = {q for q, by in store.counts().by_queue.items() if by.get(JobStatus.Queued.name)}
    unserved = sorted(watched - served)
    if not unserved:
        return Condition(False)
    return Condition(
        True,
        summary=f"no live worker serves queue {', '.join(unserved)}",
        details={"queues": unserved},
        url=f"/queues/{unserved[0]}",
    )


CHECKS = {
    "job_failed": _job_failed,
    "failure_rate": _failure_rate,
    "queue_latency": _queue_latency,
    "no_workers": _no_workers,
}


def body_of(rule: AlertRule, found: Condition, fired_at: float) -> dict[str, Any]:
    """The webhook's JSON body: ``{"alert", "when", "fired_at", "summary",
    "details", "url"}`` (``url`` a console path)."""
    return {
        "alert": rule.name,
        "when": rule.when,
        "fired_at": iso(ts(fired_at)),
        "summary": found.summary,
        "details": found.details or {},
        "url": found.url,
    }


def step(store: JobStore, rule: AlertRule, now: float) -> Firing | None:
    """Check one rule and write its new state; the firing to deliver, or None."""
    found = CHECKS[rule.when](store, rule, now)
    state: dict[str, Any] = dict(found.state or {})
    firing: Firing | None = None
    started = found.holds and not rule.firing
    if found.holds:
        send = (started or not rule.notified) and not rule.muted(now)
        state.update(firing=True, notified=send or (rule.notified and not started))
        if started:
            state["last_fired_at"] = now
        if send:
            firing = Firing(rule, body_of(rule, found, now))
    elif rule.firing:
        state.update(firing=False, notified=False)
    if state or started:
        set_state(store, rule.id, state, fired=started)
    return firing


def evaluate(store: JobStore, owner: str, lock_ttl_s: float = LOCK_TTL_S) -> list[Firing] | None:
    """One pass over every rule under the ``alerts`` lock; the firings to
    deliver (None when another instance holds the lock). A rule whose check
    fails is logged and skipped; the others go on. Raises the store's errors
    from reading the rules or taking the lock."""
    rules = alerts(store)
    if not rules:
        return []
    try:
        lock = RunLock(store, ALERTS_LOCK, ALERTS_LOCK, owner, lock_ttl_s).acquire()
    except MaintenanceBusy:
        return None
    firings: list[Firing] = []
    try:
        rules = alerts(store)  # read again under the lock: another pass may have just written
        now = store.now()
        for rule in rules:
            try:
                fired = step(store, rule, now)
            except Exception as exc:  # one bad rule never stops the others
                log.warning("alert %s (%s) not evaluated: %s", rule.name, rule.when, exc)
                continue
            if fired is not None:
                firings.append(fired)
    finally:
        lock.release()
    return firings
