"""Periodic jobs: declarations and tick arithmetic.

Declared with the handler, ``@handler("nightly-report", cron="0 3 * * *",
timezone="Europe/Paris", payload={...})``, or for a handler that also runs on
demand with ``periodic("nightly-full", "report", "0 4 * * 0", ...)`` in a
handler module. A declaration is checked when its module is imported: a bad
cron expression, time zone, payload or a second different declaration of a
name raises ScheduleError (a HandlerError, so ``load_handlers`` and the CLI
show it on one line naming the schedule and its handler). So does a job the
schedule would enqueue that enqueue would refuse (``tick_job`` checked by
``store.spec.validate_spec``: a payload with NUL, a name too long for the
tick's unique key, a queue name over the limit). ``check_declared`` (at
worker start) also checks that each schedule's handler is registered, and
checks the job again with that handler's defaults.

Cron expressions are parsed and iterated by cronsim: five fields, or six with
seconds first (``*/10 * * * * *``). Ticks are computed in the schedule's time
zone (zoneinfo), the way Debian's cron does around DST changes: a time
skipped by the spring change runs at the first valid time after the gap
(02:30 on a day that jumps from 02:00 to 03:00 runs at 03:00), a time that
happens twice in the autumn runs once (the first), and hourly or finer
expressions follow the clock (two 02:00 ticks in the repeated hour).
Described for people by cron-descriptor ("At 03:00, every day").

This module has no I/O; ``workers.scheduler`` enqueues the ticks.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson
from cronsim import CronSim, CronSimError

from store.cron import describe as describe
from store.cron import description_options as description_options
from store.cron import interval_at as interval_at
from store.cron import latest_tick as latest_tick
from store.cron import next_tick as next_tick
from store.cron import tick_label as tick_label
from store.errors import ValidationError
from store.models import Schedule
from store.spec import MAX_DELAY_S, MAX_IDEMPOTENCY_KEY_LEN, JobSpec, validate_spec
from workers.handlers import HandlerError, HandlerSpec, get_handler

__all__ = [
    "PeriodicSpec",
    "ScheduleError",
    "check_declared",
    "declared",
    "describe",
    "latest_tick",
    "next_tick",
    "periodic",
    "tick_job",
]

#: Least ``unique_for`` of a tick's job, seconds: however late a slow
#: scheduler sees a tick, the key still refuses a second job for it.
MIN_UNIQUE_FOR_S = 3600.0
#: Headers of a periodic job naming its schedule and tick.
SCHEDULE_HEADER = "Leasehold-Periodic"
TICK_HEADER = "Leasehold-Tick"


class ScheduleError(HandlerError):
    """A periodic job is declared wrongly; the message names it and its handler."""


@dataclass(frozen=True, slots=True)
class PeriodicSpec:
    """A declared periodic job: enqueue ``handler`` with ``payload`` on ``queue``
    (None: the handler's queue) at every tick of ``cron`` in ``timezone``.
    ``catch_up``: after downtime, enqueue the latest missed tick."""

    name: str
    handler: str
    cron: str
    timezone: str = "UTC"
    payload: Any = None
    queue: str | None = None
    catch_up: bool = True

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def resolved_queue(self) -> str:
        """``queue``, else the handler's queue, else ``default``."""
        if self.queue is not None:
            return self.queue
        spec = get_handler(self.handler)
        return spec.queue if spec is not None else "default"

    def schedule(self) -> Schedule:
        """The stored form (``JobStore.save_schedules``)."""
        return Schedule(
            name=self.name,
            handler=self.handler,
            cron=self.cron,
            timezone=self.timezone,
            queue=self.resolved_queue(),
            payload=self.payload,
            catch_up=self.catch_up,
        )


def tick_key(name: str, tick: float) -> str:
    """The unique key of the job of ``tick`` of schedule ``name``."""
    return f"periodic:{name}:{int(tick)}"


def tick_job(spec: PeriodicSpec, handler: HandlerSpec | None, tick: float) -> JobSpec:
    """The job ``tick`` of ``spec`` enqueues: ``handler``'s defaults (when it
    is registered), the schedule's payload and queue, unique per tick (key
    ``tick_key``, kept at least MIN_UNIQUE_FOR_S or one interval), headers
    naming the schedule and the tick."""
    unique_for = min(MAX_DELAY_S, max(MIN_UNIQUE_FOR_S, interval_at(spec.cron, spec.tz, tick)))
    options: dict[str, Any] = {
        "queue": spec.resolved_queue(),
        "unique_key": tick_key(spec.name, tick),
        "unique_for": unique_for,
        "headers": {SCHEDULE_HEADER: spec.name, TICK_HEADER: tick_label(tick, spec.tz)},
    }
    if handler is None:
        return JobSpec(spec.handler, spec.payload, **options)
    return handler.job_spec(spec.payload, **options)


# ----------------------------------------------------------------- declarations
_declared: dict[str, PeriodicSpec] = {}
_lock = threading.Lock()


def _fail(name: str, handler: str, problem: str) -> ScheduleError:
    who = f"periodic job {name!r}" if name == handler else f"periodic job {name!r} (handler {handler!r})"
    return ScheduleError(f"{who}: {problem}")


def _check(spec: PeriodicSpec) -> None:
    name, handler = spec.name, spec.handler
    if not isinstance(handler, str) or not handler.strip():
        raise _fail(name, str(handler), "the handler name must be a non-empty string")
    if not isinstance(spec.cron, str):
        raise _fail(name, handler, f"cron must be a string, got {spec.cron!r}")
    try:
        tz = ZoneInfo(spec.timezone)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise _fail(name, handler, f"unknown time zone {spec.timezone!r}") from None
    try:
        CronSim(spec.cron, datetime.now(tz))
    except CronSimError as exc:
        raise _fail(name, handler, f"invalid cron expression {spec.cron!r} ({exc})") from None
    if next_tick(spec.cron, tz, datetime.now(tz).timestamp()) is None:
        raise _fail(name, handler, f"cron expression {spec.cron!r} never fires")
    if spec.queue is not None and (not isinstance(spec.queue, str) or not spec.queue.strip()):
        raise _fail(name, handler, "queue must be a non-empty string")
    if not isinstance(spec.catch_up, bool):
        raise _fail(name, handler, "catch_up must be True or False")
    try:
        orjson.dumps(spec.payload)
    except TypeError as exc:
        raise _fail(name, handler, f"payload must be JSON-serialisable ({exc})") from None
    _check_job(spec)


def _check_job(spec: PeriodicSpec) -> None:
    """Raise ScheduleError when enqueue would refuse the job of the next
    tick (the same checks as every enqueue: ``store.spec.validate_spec``)."""
    tz = spec.tz
    tick = next_tick(spec.cron, tz, datetime.now(tz).timestamp())
    if tick is None:  # _check refused it already
        return
    try:
        validate_spec(tick_job(spec, get_handler(spec.handler), tick))
    except ValidationError as exc:
        if exc.field == "unique_key" and "NUL" not in exc.message:  # periodic:<name>:<tick>
            longest = MAX_IDEMPOTENCY_KEY_LEN - len(tick_key("", tick))
            problem = f"the name must be at most {longest} characters (it is part of each tick's unique key)"
        elif exc.field in ("unique_key", "headers"):  # the name is in both
            problem = f"the name {exc.message}"
        else:
            problem = f"the job it enqueues is refused: {exc}"
        raise _fail(spec.name, spec.handler, problem) from None


def periodic(
    name: str,
    handler: str,
    cron: str,
    *,
    timezone: str = "UTC",
    payload: Any = None,
    queue: str | None = None,
    catch_up: bool = True,
) -> PeriodicSpec:
    """Declare a periodic job ``name``: enqueue the handler named ``handler``
    at every tick of ``cron`` (5 fields, or 6 with seconds first) in
    ``timezone`` (an IANA name), with ``payload`` on ``queue`` (None: the
    handler's). ``catch_up=False`` skips a tick the schedulers were down for.

    Raises ScheduleError (one line naming the schedule and its handler) for a
    bad expression, time zone, payload, or a different declaration of ``name``."""
    if not isinstance(name, str) or not name.strip():
        raise ScheduleError("a periodic job's name must be a non-empty string")
    spec = PeriodicSpec(name, handler, cron, timezone, payload, queue, catch_up)
    _check(spec)
    with _lock:
        old = _declared.get(name)
        if old is not None and old != spec:
            raise _fail(name, handler, "is already declared with other options")
        _declared[name] = spec
    return spec


def declared() -> list[PeriodicSpec]:
    """Every declared periodic job, by name."""
    return [_declared[name] for name in sorted(_declared)]


def check_declared() -> list[PeriodicSpec]:
    """The declared periodic jobs, after checking each one's handler is
    registered (call once the handler modules are loaded). Raises ScheduleError."""
    specs = declared()
    for spec in specs:
        if get_handler(spec.handler) is None:
            raise _fail(spec.name, spec.handler, f"no handler named {spec.handler!r} is registered")
        _check_job(spec)
    return specs


def forget(name: str) -> None:
    """Drop a declaration (tests)."""
    with _lock:
        _declared.pop(name, None)
