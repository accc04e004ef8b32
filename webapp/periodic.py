"""Periodic-job schedules as the API and the console show them: the cron
expression in words, the next run, the last run's job and its status.

Parsing uses cronsim (next run, in the schedule's IANA time zone, so DST is
the library's; the same parser as the workers' scheduler) and cron-descriptor
(words, 24-hour clock, English). Both are
read-only here: the scheduler in the workers decides what runs; this module
describes a stored Schedule, and turns one on or off or enqueues its job now
for an operator (``set_enabled``, ``run_spec`` and ``run_now``), each recorded in the audit log.
A bad expression or zone does not break a page: its description says so and
it has no next run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cron_descriptor import ExpressionDescriptor
from cronsim import CronSim, CronSimError

from store.base import JobStore
from store.catalogue import run_now_spec as catalogue_spec
from store.cron import description_options
from store.errors import JobNotFound, ScheduleNotFound
from store.lifecycle import EventKind
from store.models import Job, JobSpec, Schedule, iso


def describe(cron: str) -> str:
    """``"0 3 * * *"`` -> ``"At 03:00, every day"``, ``"* * * * *"`` -> ``"Every
    minute"`` (``store.cron.description_options``); a note for a bad expression."""
    try:
        return str(ExpressionDescriptor(cron, description_options(cron)).get_description())
    except Exception as exc:  # cron-descriptor raises several unrelated types
        return f"invalid expression ({exc})"


def next_run(cron: str, timezone: str, now_s: float) -> datetime | None:
    """The first tick of ``cron`` in ``timezone`` after ``now_s`` (epoch
    seconds), as an aware UTC datetime; None for a bad expression or zone."""
    try:
        zone = ZoneInfo(timezone)
        start = datetime.fromtimestamp(now_s, zone)
        tick = next(CronSim(cron, start))
    except (ZoneInfoNotFoundError, CronSimError, ValueError, StopIteration):
        return None
    return tick.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class ScheduleView:
    """A stored schedule with what people read: ``description`` in words,
    ``next_run_at`` and ``next_in_s`` (seconds from the store's clock; None
    when disabled or invalid), the last job's status name (None when the job
    is gone or there is none)."""

    schedule: Schedule
    description: str
    next_run_at: datetime | None
    next_in_s: float | None
    last_job_status: str | None

    def to_json(self) -> dict[str, Any]:
        s = self.schedule
        return {
            "name": s.name,
            "handler": s.handler,
            "cron": s.cron,
            "timezone": s.timezone,
            "queue": s.queue,
            "payload": s.payload,
            "catch_up": s.catch_up,
            "description": self.description,
            "enabled": s.enabled,
            "next_run_at": iso(self.next_run_at),
            "last_tick_at": iso(s.last_tick_at),
            "last_job_id": s.last_job_id,
            "last_job_status": self.last_job_status,
        }


def _status_of(store: JobStore, job_id: str | None) -> str | None:
    if not job_id:
        return None
    try:
        return store.get(job_id).status.name
    except JobNotFound:  # pruned or deleted since
        return None


def view(store: JobStore, schedule: Schedule, now_s: float) -> ScheduleView:
    """One schedule described (reads its last job)."""
    nxt = next_run(schedule.cron, schedule.timezone, now_s) if schedule.enabled else None
    return ScheduleView(
        schedule,
        describe(schedule.cron),
        nxt,
        None if nxt is None else nxt.timestamp() - now_s,
        _status_of(store, schedule.last_job_id),
    )


def views(store: JobStore) -> list[ScheduleView]:
    """Every stored schedule, by name, described at the store's clock."""
    now_s = store.now()
    return [view(store, s, now_s) for s in store.schedules()]


def find(store: JobStore, name: str) -> Schedule | None:
    """The stored schedule called ``name``, or None."""
    return next((s for s in store.schedules() if s.name == name), None)


def set_enabled(store: JobStore, name: str, enabled: bool, actor: str) -> Schedule:
    """Turn a schedule on or off for ``actor`` (``operator:<name>``), with one
    audit entry. Raises ScheduleNotFound."""
    schedule = store.set_schedule_enabled(name, enabled)
    kind = EventKind.SCHEDULE_ENABLED if enabled else EventKind.SCHEDULE_DISABLED
    store.record_audit(kind, actor, f"schedule {name}")
    return schedule


def run_spec(store: JobStore, name: str, idempotency_key: str | None = None) -> JobSpec:
    """The job "run now" enqueues for the schedule ``name``: its handler,
    payload and queue, the handler's retries and timeout from the catalogue.
    Raises ScheduleNotFound."""
    schedule = find(store, name)
    if schedule is None:
        raise ScheduleNotFound(name)
    return dataclasses.replace(catalogue_spec(store, schedule), idempotency_key=idempotency_key)


def run_now(store: JobStore, name: str, spec: JobSpec, actor: str) -> tuple[Job, bool]:
    """Enqueue ``spec`` (``run_spec``) of the schedule ``name`` now, outside
    its ticks, for ``actor``: ``(job, created)``. With an idempotency key
    already used, the job it made and False, and nothing is written (a double
    click makes one job); a new job gets one audit entry."""
    job, created = store.enqueue_idempotent(spec)
    if created:
        store.record_audit(EventKind.SCHEDULE_RUN, actor, f"schedule {name}: job {job.id} enqueued now")
    return job, created
