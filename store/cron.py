"""Cron schedules as numbers and words: the ticks of an expression in a time
zone (cronsim) and the expression in English (cron-descriptor). Pure: the
worker's scheduler (workers/scheduler.py), the console, the API and the
command all read schedules through it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from cronsim import CronSim


def _parse(cron: str, tz: ZoneInfo, at: datetime, reverse: bool = False) -> CronSim:
    return CronSim(cron, at.astimezone(tz), reverse=reverse)


def next_tick(cron: str, tz: ZoneInfo, after: float) -> float | None:
    """The first tick strictly after ``after`` (epoch seconds); None if the
    expression never fires again. Raises CronSimError for a bad expression."""
    return _epoch(next(_parse(cron, tz, datetime.fromtimestamp(after, tz)), None))


def latest_tick(cron: str, tz: ZoneInfo, at: float) -> float | None:
    """The latest tick at or before ``at`` (epoch seconds); None if none."""
    # Ticks fall on whole seconds; cronsim's reverse iteration is strictly before its start.
    start = datetime.fromtimestamp(int(at) + 1, tz)
    return _epoch(next(_parse(cron, tz, start, reverse=True), None))


def interval_at(cron: str, tz: ZoneInfo, tick: float) -> float:
    """Seconds from ``tick`` to the tick after it (0 when there is none)."""
    after = next_tick(cron, tz, tick)
    return 0.0 if after is None else after - tick


def _epoch(dt: datetime | None) -> float | None:
    return None if dt is None else dt.timestamp()


def description_options(cron: str) -> Any:
    """cron-descriptor's Options for ``cron`` (English, 24-hour clock), shared
    by every place that puts a schedule into words. Verbose names the day of
    a daily time ("At 03:00, every day"), but for an expression that fires
    every hour or more often it adds only noise ("Every minute, every hour,
    every day"): terse then."""
    from cron_descriptor import Options

    options = Options()
    options.use_24hour_time_format = True
    options.locale_code = "en_US"
    fields = cron.split()
    options.verbose = not (len(fields) in (5, 6) and fields[-4] == "*")  # the hour field
    return options


def describe(cron: str) -> str:
    """The expression in words ("At 03:00, every day", "Every minute"); the
    expression itself when cron-descriptor cannot read it. cron-descriptor is
    imported here, on first use (the console, ``leasehold periodic list``): a
    worker never describes a schedule and saves its ~5 MB."""
    from cron_descriptor import ExpressionDescriptor

    try:
        return str(ExpressionDescriptor(cron, description_options(cron)).get_description())
    except Exception:  # a description is a nicety; never fail a listing for it
        return cron


def tick_label(tick: float, tz: ZoneInfo) -> str:
    """A tick as ISO 8601 in its time zone (job headers, logs)."""
    return datetime.fromtimestamp(tick, tz).isoformat()
