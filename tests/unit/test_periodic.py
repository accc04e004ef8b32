"""Periodic-job declarations and tick arithmetic: DST in
Europe/Paris, descriptions, and one-line errors naming the handler."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from workers import handler, periodic
from workers.handlers import unregister
from workers.periodic import (
    ScheduleError,
    check_declared,
    declared,
    describe,
    forget,
    latest_tick,
    next_tick,
)

PARIS = ZoneInfo("Europe/Paris")


def at(*fields: int) -> float:
    return datetime(*fields, tzinfo=PARIS).timestamp()  # type: ignore[misc]


def ticks(cron: str, start: float, n: int) -> list[str]:
    out, t = [], start
    for _ in range(n):
        t = next_tick(cron, PARIS, t)  # type: ignore[assignment]
        out.append(datetime.fromtimestamp(t, PARIS).isoformat())
    return out


def test_daily_job_across_the_spring_change_runs_once_after_the_gap() -> None:
    # 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist that day.
    assert ticks("30 2 * * *", at(2026, 3, 28, 12), 3) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
    ]
    assert ticks("0 3 * * *", at(2026, 3, 28, 12), 2) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T03:00:00+02:00",
    ]


def test_daily_job_across_the_autumn_change_runs_once() -> None:
    # 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
    assert ticks("30 2 * * *", at(2026, 10, 24, 12), 2) == [
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:30:00+01:00",
    ]
    # 03:00 on the 24th (CEST) to 03:00 on the 25th (CET): 25 hours of real time.
    first = next_tick("0 3 * * *", PARIS, at(2026, 10, 24, 0))
    second = next_tick("0 3 * * *", PARIS, first)  # type: ignore[arg-type]
    assert second - first == 25 * 3600  # type: ignore[operator]


def test_hourly_job_follows_the_clock_through_both_changes() -> None:
    assert ticks("0 * * * *", at(2026, 3, 29, 0, 30), 3) == [
        "2026-03-29T01:00:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-29T04:00:00+02:00",
    ]
    assert ticks("0 * * * *", at(2026, 10, 25, 1, 30), 3) == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:00:00+01:00",
        "2026-10-25T03:00:00+01:00",
    ]


def test_latest_tick_is_at_or_before() -> None:
    three = at(2026, 5, 1, 3)
    assert latest_tick("0 3 * * *", PARIS, three) == three
    assert latest_tick("0 3 * * *", PARIS, three + 0.5) == three
    assert latest_tick("0 3 * * *", PARIS, three - 1) == three - 86400
    assert latest_tick("* * * * * *", PARIS, three + 7.9) == three + 7


def test_descriptions_in_words() -> None:
    assert describe("0 3 * * *") == "At 03:00, every day"
    assert describe("30 2 * * 1-5") == "At 02:30, Monday through Friday"
    assert describe("not cron") == "not cron"
    # No redundant "every hour, every day" for what fires hourly or more often.
    assert describe("* * * * *") == "Every minute"
    assert describe("*/5 * * * *") == "Every 5 minutes"
    assert describe("0 * * * *") == "Every hour"


@pytest.fixture
def clean_registry():
    before = {s.name for s in declared()}
    yield
    for spec in declared():
        if spec.name not in before:
            forget(spec.name)
            unregister(spec.name)


@pytest.mark.parametrize(
    ("cron", "tz", "needle"),
    [
        ("0 3 * *", "UTC", "invalid cron expression '0 3 * *'"),
        ("61 * * * *", "UTC", "invalid cron expression '61 * * * *'"),
        ("0 3 * * *", "Europe/Atlantis", "unknown time zone 'Europe/Atlantis'"),
    ],
)
def test_a_bad_schedule_is_one_line_naming_the_handler(
    clean_registry: None, cron: str, tz: str, needle: str
) -> None:
    with pytest.raises(ScheduleError) as exc:

        @handler("nightly-report", cron=cron, timezone=tz)
        def nightly(ctx):  # pragma: no cover - never runs
            return None

    message = str(exc.value)
    assert message.startswith("periodic job 'nightly-report': ") and needle in message
    assert "\n" not in message


def test_periodic_names_a_handler_that_also_runs_on_demand(clean_registry: None) -> None:
    @handler("report-x")
    def report(ctx):  # pragma: no cover
        return None

    spec = periodic(
        "weekly-report-x", "report-x", "0 4 * * 0", timezone="Europe/Paris", payload={"full": True}
    )
    assert spec in check_declared()
    assert spec.schedule().queue == "default"
    periodic(
        "weekly-report-x", "report-x", "0 4 * * 0", timezone="Europe/Paris", payload={"full": True}
    )  # same: ok
    with pytest.raises(ScheduleError, match="already declared"):
        periodic("weekly-report-x", "report-x", "0 5 * * 0")
    periodic("orphan-x", "missing-handler", "0 4 * * *")
    with pytest.raises(
        ScheduleError, match="periodic job 'orphan-x' \\(handler 'missing-handler'\\): no handler"
    ):
        check_declared()
    with pytest.raises(ScheduleError, match="payload"):
        periodic("bad-payload-x", "report-x", "0 4 * * *", payload={"x": object()})


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"name": "n" * 181}, "the name must be at most 180 characters"),
        ({"payload": {"text": "a\x00b"}}, "payload: must not contain NUL characters"),
        ({"queue": "q" * 101}, "queue: must be at most 100 characters"),
        ({"name": "nul\x00name"}, "the name must not contain NUL characters"),
    ],
)
def test_a_schedule_whose_job_enqueue_would_refuse_is_refused_when_declared(
    clean_registry: None, options: dict[str, object], needle: str
) -> None:
    @handler("report-v")
    def report(ctx):  # pragma: no cover
        return None

    name = str(options.pop("name", "checked-x"))
    with pytest.raises(ScheduleError) as exc:
        periodic(name, "report-v", "0 4 * * *", **options)  # type: ignore[arg-type]
    message = str(exc.value)
    assert message.startswith(f"periodic job {name!r} (handler 'report-v'): ") and needle in message
    assert "\n" not in message
    assert name not in {s.name for s in declared()}
    periodic("n" * 180, "report-v", "0 4 * * *")  # the longest name that fits


def test_a_handlers_queue_is_checked_with_its_schedule(clean_registry: None) -> None:
    with pytest.raises(ScheduleError, match=r"periodic job 'long-queue-v': .*queue: must be at most 100"):

        @handler("long-queue-v", "q" * 101, cron="0 4 * * *")
        def job(ctx):  # pragma: no cover
            return None
