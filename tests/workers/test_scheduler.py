"""The scheduler in process, on every store: exactly one
job per tick however many schedulers look, only the latest missed tick after
downtime, catch-up off, disabled schedules, a failing schedule that does not
stop the others. The store's clock is moved, never slept on."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime

import pytest

from store.base import JobStore
from tests.backends import StoreHandle
from workers.declare import handler as register
from workers.handlers import HandlerSpec, unregister
from workers.periodic import PeriodicSpec
from workers.scheduler import FAILED_RETRY_S, MISSED_AFTER_S, SCHEDULE_HEADER, TICK_HEADER, Scheduler

HOURLY = PeriodicSpec("hourly", "report-s", "0 * * * *", "Europe/Paris", {"full": True}, "reports")


@pytest.fixture(autouse=True)
def report_handler() -> Iterator[HandlerSpec]:
    register("report-s", max_retries=1)(lambda ctx: None)
    yield
    unregister("report-s")


def start(store: JobStore, *specs: PeriodicSpec) -> Scheduler:
    scheduler = Scheduler(store, "test", list(specs) or [HOURLY])
    scheduler.start_up()
    return scheduler


def to_next_hour(store: JobStore, plus_s: float = 1.0) -> float:
    """Move the store's clock to ``plus_s`` after the next whole hour; that hour."""
    now = store.now()
    hour = (now // 3600 + 1) * 3600
    store.clock_offset_s += hour + plus_s - now
    return hour


def tick_jobs(store: JobStore) -> list[tuple[float, str]]:
    out = []
    for job in store.list_jobs(name="report-s", limit=500).items:
        assert job.headers is not None and job.headers[SCHEDULE_HEADER] == "hourly"
        out.append((datetime.fromisoformat(job.headers[TICK_HEADER]).timestamp(), job.id))
    return sorted(out)


def test_three_schedulers_one_job_per_tick(handle: StoreHandle) -> None:
    stores = [handle.store, handle.open(), handle.open()]
    schedulers = [start(s) for s in stores]
    hour = to_next_hour(stores[0])
    for s in stores[1:]:
        s.clock_offset_s = stores[0].clock_offset_s
    assert sum(s.tick(exact=True) for s in schedulers) == 1
    [(tick, job_id)] = tick_jobs(handle.store)
    job = handle.store.get(job_id)
    assert (tick, job.queue, job.payload, job.max_retries) == (hour, "reports", {"full": True}, 1)
    [row] = handle.store.schedules()
    assert (row.last_tick_at.timestamp(), row.last_job_id) == (hour, job_id)  # type: ignore[union-attr]
    assert sum(s.tick(exact=True) for s in schedulers) == 0  # looked again: nothing new


def test_a_new_schedule_starts_with_its_next_tick(store: JobStore) -> None:
    scheduler = start(store)
    assert scheduler.tick(exact=True) == 0  # the last whole hour is before the start
    hour = to_next_hour(store)
    assert scheduler.tick(exact=True) == 1
    assert [t for t, _ in tick_jobs(store)] == [hour]


def test_after_downtime_only_the_latest_missed_tick(store: JobStore) -> None:
    scheduler = start(store)
    first = to_next_hour(store)
    scheduler.tick(exact=True)
    store.clock_offset_s += 5 * 3600 + 600  # down for five ticks
    again = start(store)  # a restarted worker
    assert again.tick(exact=True) == 1
    assert [t for t, _ in tick_jobs(store)] == [first, first + 5 * 3600]


def test_catch_up_off_skips_a_missed_tick(store: JobStore) -> None:
    spec = PeriodicSpec("hourly", "report-s", "0 * * * *", "UTC", None, None, catch_up=False)
    scheduler = start(store, spec)
    first = to_next_hour(store)
    assert scheduler.tick(exact=True) == 1
    store.clock_offset_s += 3 * 3600 + MISSED_AFTER_S + 1  # down past three ticks
    assert start(store, spec).tick(exact=True) == 0
    second = to_next_hour(store, plus_s=MISSED_AFTER_S - 5)  # late, but within the limit
    assert scheduler.tick(exact=True) == 1
    assert [t for t, _ in tick_jobs(store)] == [first, second]


def test_a_disabled_schedule_enqueues_nothing_until_enabled(store: JobStore) -> None:
    scheduler = start(store)
    first = to_next_hour(store)
    scheduler.tick(exact=True)
    store.set_schedule_enabled("hourly", False)
    to_next_hour(store)
    assert scheduler.tick(exact=True) == 0
    start(store)  # a restart keeps the operator's switch
    assert store.schedules()[0].enabled is False
    store.set_schedule_enabled("hourly", True)
    hour = to_next_hour(store)
    assert scheduler.tick(exact=True) == 1
    assert [t for t, _ in tick_jobs(store)] == [first, hour]


def test_a_schedule_that_fails_is_logged_and_skipped_and_the_others_run(
    store: JobStore, caplog: pytest.LogCaptureFixture
) -> None:
    # Built directly, past the declaration checks: its tick's unique key is too long for enqueue.
    bad = PeriodicSpec("a" * 190, "report-s", "0 * * * *", "UTC")
    scheduler = start(store, bad, HOURLY)  # the bad one is looked at first
    hour = to_next_hour(store)
    with caplog.at_level(logging.ERROR, logger="workers.scheduler"):
        assert scheduler.tick(exact=True) == 1
    assert [t for t, _ in tick_jobs(store)] == [hour]
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert f"periodic job {bad.name}: tick failed" in record.getMessage()
    assert "unique_key" in record.getMessage()
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="workers.scheduler"):
        assert scheduler.tick(exact=True) == 0  # not tried again at once, every look
    assert not caplog.records
    store.clock_offset_s += FAILED_RETRY_S + 1
    with caplog.at_level(logging.ERROR, logger="workers.scheduler"):
        scheduler.tick(exact=True)
    assert [r.getMessage() for r in caplog.records if bad.name in r.getMessage()]  # tried again later
