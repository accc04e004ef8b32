"""Periodic jobs with real worker processes: three
schedulers on a one-second schedule make exactly one job per tick; workers
restarted after a gap enqueue exactly one catch-up job (the latest missed
tick); a bad schedule stops the worker with one line naming its handler.

Waits are bounded polls of the store (``wait_until``), the store's clock
included; nothing sleeps a guessed time."""

from __future__ import annotations

import math
import signal
from collections import Counter
from datetime import datetime

import pytest

from store.base import JobStore
from tests.backends import StoreHandle
from tests.workers.procs import Spawner, registered, wait_until
from workers.scheduler import TICK_HEADER

PERIODIC_ENV = {"LEASEHOLD_HANDLERS": "tests.handlers,tests.periodic_handlers"}


def ticks(store: JobStore) -> list[float]:
    """The tick of every job the schedule made (from its header)."""
    out, cursor = [], None
    while True:
        page = store.list_jobs(name="tick", limit=500, cursor=cursor)
        out += [datetime.fromisoformat(j.headers[TICK_HEADER]).timestamp() for j in page.items if j.headers]
        if page.next_cursor is None:
            return sorted(out)
        cursor = page.next_cursor


def clock_past(store: JobStore, t: float, timeout: float = 60) -> float:
    return wait_until(lambda: (now := store.now()) > t and now, timeout=timeout, what=f"store clock past {t}")


def stop_all(spawn: Spawner) -> None:
    for proc in spawn.procs:
        proc.signal(signal.SIGTERM)
    for proc in spawn.procs:
        assert proc.wait(60) == 0, proc.log()


@pytest.mark.slow
def test_three_schedulers_make_exactly_one_job_per_tick(handle: StoreHandle, spawn: Spawner) -> None:
    store = handle.store
    names = [f"sched-{i}" for i in range(3)]
    for name in names:
        spawn.worker(name=name, env=PERIODIC_ENV)
    wait_until(lambda: all(registered(store, n) for n in names), what="three workers registered")
    wait_until(lambda: all("scheduler of" in p.log() for p in spawn.procs), what="three schedulers started")
    t0 = store.now()
    t1 = clock_past(store, t0 + 10)
    clock_past(store, math.floor(t1) + 1.5)  # let the last tick of the window be enqueued
    stop_all(spawn)
    per_tick = Counter(ticks(store))
    assert max(per_tick.values()) == 1, per_tick
    window = range(math.ceil(t0), math.floor(t1) + 1)
    assert len(window) >= 10
    missing = [t for t in window if per_tick[float(t)] != 1]
    assert missing == [], f"ticks without their job: {missing}"
    [row] = store.schedules()
    assert row.enabled and row.last_tick_at is not None and row.last_tick_at.timestamp() >= window[-1]


@pytest.mark.slow
def test_restart_after_a_gap_enqueues_one_catch_up_job(handle: StoreHandle, spawn: Spawner) -> None:
    store = handle.store
    for i in range(2):
        spawn.worker(name=f"first-{i}", env=PERIODIC_ENV)
    wait_until(lambda: store.schedules() and store.schedules()[0].last_tick_at, what="a first tick")
    wait_until(lambda: all("scheduler of" in p.log() for p in spawn.procs), what="both schedulers started")
    stop_all(spawn)
    spawn.procs.clear()
    last = store.schedules()[0].last_tick_at.timestamp()  # type: ignore[union-attr]
    before = ticks(store)
    assert before[-1] == last
    # While they are down, the schedule (now two ticks a minute) fires twice.
    b = math.ceil(store.now()) + 1
    c = b + 2
    clock_past(store, c + 1)
    cron = {"TEST_PERIODIC_CRON": f"{b % 60},{c % 60} * * * * *", **PERIODIC_ENV}
    for i in range(2):
        spawn.worker(name=f"again-{i}", env=cron)
    wait_until(lambda: len(ticks(store)) > len(before), what="the catch-up job")
    wait_until(lambda: all("scheduler of" in p.log() for p in spawn.procs), what="both schedulers started")
    clock_past(store, store.now() + 1.5)  # both have looked at least once since
    assert ticks(store) == [*before, c]  # not b: only the latest missed tick
    assert store.schedules()[0].last_tick_at.timestamp() == c  # type: ignore[union-attr]
    stop_all(spawn)


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"TEST_PERIODIC_CRON": "0 3 * *"}, "invalid cron expression '0 3 * *'"),
        ({"TEST_PERIODIC_TZ": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        # A job enqueue would refuse: found at start, not at every tick.
        ({"TEST_PERIODIC_QUEUE": "q" * 101}, "queue: must be at most 100 characters"),
    ],
)
def test_a_bad_schedule_stops_the_worker_with_one_line(
    handle: StoreHandle, spawn: Spawner, env: dict[str, str], needle: str
) -> None:
    done = spawn.flask("worker", env={**PERIODIC_ENV, **env})
    assert done.returncode != 0 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("Error: ") and "periodic job 'tick'" in lines[0] and needle in lines[0]
