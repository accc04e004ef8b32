"""The scheduler of periodic jobs: a thread in each
worker process.

Any number of schedulers may run, on one store: each tick produces exactly
one job because the job is enqueued as a unique job keyed by schedule and
tick (``periodic:<name>:<tick epoch>``), which the store checks and inserts
atomically; ``last_tick_at`` (``store.record_tick``) only spares the others
the enqueue.

At start the scheduler stores the declared schedules (``save_schedules``:
operators' enabled switches and the last tick are kept). It then wakes at
each tick of its schedules (at least every POLL_S) and, for each schedule
with a new tick due, reads the stored schedules once and decides on the
latest tick at or before the store's clock:

* disabled: nothing (looked at again within DISABLED_RECHECK_S; enabling it
  again is like coming back from downtime, see catch-up);
* already at or before ``last_tick_at``: another scheduler enqueued it;
* never ticked: only ticks at or after this scheduler started count (a new
  schedule starts with its next tick, not a past one);
* ``catch_up=False`` and more than MISSED_AFTER_S late: skipped (missed
  during downtime or an outage);
* otherwise: enqueued, then ``record_tick``. After downtime only the latest
  missed tick is enqueued (with ``catch_up``), never one per missed tick.

Only schedules declared in this process are enqueued (a schedule whose code
was removed stops once no worker declares it). Ticks are whole seconds of
the store's clock (``store.now()``), read when a tick is due and tracked in
between with the local clock and the offset measured then.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass

from store.base import JobStore
from store.models import Schedule
from workers.handlers import get_handler
from workers.periodic import MIN_UNIQUE_FOR_S as MIN_UNIQUE_FOR_S
from workers.periodic import SCHEDULE_HEADER as SCHEDULE_HEADER
from workers.periodic import TICK_HEADER as TICK_HEADER
from workers.periodic import PeriodicSpec, latest_tick, next_tick, tick_job, tick_label
from workers.periodic import tick_key as tick_key

log = logging.getLogger(__name__)

#: Longest sleep between two looks, seconds.
POLL_S = 1.0
#: How often a disabled schedule is read again, seconds.
DISABLED_RECHECK_S = 5.0
#: With ``catch_up=False``, a tick seen later than this (seconds) is skipped.
MISSED_AFTER_S = 60.0
#: After a schedule's tick failed (logged with its name), seconds before
#: that schedule is tried again; the other schedules are not held up.
FAILED_RETRY_S = 10.0


@dataclass(slots=True)
class _State:
    """What this scheduler knows of one schedule between store reads."""

    spec: PeriodicSpec
    handled: float = -math.inf  # latest tick decided on
    recheck_at: float = -math.inf  # disabled: when to read it again (store clock)
    retry_at: float = -math.inf  # its last tick failed: not before then (store clock)


class Scheduler(threading.Thread):
    """Enqueues the ticks of ``specs`` (declared periodic jobs) on ``store``."""

    def __init__(
        self, store: JobStore, owner: str, specs: list[PeriodicSpec], poll_s: float = POLL_S
    ) -> None:
        super().__init__(name="leasehold-scheduler", daemon=True)
        self.store = store
        self.owner = owner
        self.poll_s = poll_s
        self._states = {s.name: _State(s) for s in specs}
        self._stop_event = threading.Event()
        self._offset = 0.0  # store clock - local clock
        self.started_at = 0.0

    # ----------------------------------------------------------- control
    def stop(self) -> None:
        self._stop_event.set()

    def start_up(self) -> None:
        """Store the declared schedules and note the start (store clock).
        Raises the store's errors (the worker does not start without it)."""
        self.store.save_schedules([s.spec.schedule() for s in self._states.values()])
        self.started_at = self._sync()
        names = ", ".join(sorted(self._states))
        log.info("scheduler of %s: %d periodic job(s): %s", self.owner, len(self._states), names)

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self.tick()
            except Exception as exc:  # keep the thread alive; the next look retries
                log.warning("scheduler: %s", exc)
            self._stop_event.wait(self._until_next())

    # -------------------------------------------------------------- clock
    def _sync(self) -> float:
        now = self.store.now()
        self._offset = now - time.time()
        return now

    def _now(self) -> float:
        return time.time() + self._offset

    def _until_next(self) -> float:
        """Seconds until the next tick of any schedule (at most poll_s)."""
        now = self._now()
        wait = self.poll_s
        for state in self._states.values():
            spec = state.spec
            after = next_tick(spec.cron, spec.tz, now)
            if after is not None:
                wait = min(wait, after - now + 0.002)
        return max(0.005, wait)

    # --------------------------------------------------------------- work
    def _due(self, now: float) -> list[tuple[_State, float]]:
        due = []
        for state in self._states.values():
            tick = latest_tick(state.spec.cron, state.spec.tz, now)
            if now < state.retry_at:
                continue
            if tick is not None and (tick > state.handled or now >= state.recheck_at):
                due.append((state, tick))
        return due

    def tick(self, *, exact: bool = False) -> int:
        """One look: enqueue the ticks now due; returns how many jobs this
        scheduler created. ``exact``: read the store's clock even when the
        local estimate says nothing is due (tests that move the store's
        clock). Each schedule is guarded: one whose tick raises is logged
        with its name and tried again after FAILED_RETRY_S, and the others
        still run. Raises the store's errors of the reads all schedules
        share (the clock, the stored schedules)."""
        if not exact and not self._due(self._now()):
            return 0
        now = self._sync()
        rows = {row.name: row for row in self.store.schedules()}
        created = 0
        for state, _ in self._due(now):
            try:
                tick = latest_tick(state.spec.cron, state.spec.tz, now)
                if tick is not None and self._decide(state, rows.get(state.spec.name), tick, now):
                    created += self._enqueue(state, tick)
            except Exception as exc:  # one schedule's failure must not stop the others
                state.retry_at = now + FAILED_RETRY_S
                log.error(
                    "periodic job %s: tick failed, skipped (tried again in %gs): %s: %s",
                    state.spec.name,
                    FAILED_RETRY_S,
                    type(exc).__name__,
                    exc,
                )
        return created

    def _decide(self, state: _State, row: Schedule | None, tick: float, now: float) -> bool:
        """True when ``tick`` is to be enqueued; otherwise notes it as handled."""
        spec = state.spec
        state.recheck_at = math.inf
        if row is not None and not row.enabled:
            state.recheck_at = now + DISABLED_RECHECK_S
            return False
        last = row.last_tick_at.timestamp() if row is not None and row.last_tick_at else None
        skip = None
        if last is not None and tick <= last:
            skip = "done"
        elif last is None and tick < self.started_at:
            skip = "before the first start"
        elif not spec.catch_up and now - tick > MISSED_AFTER_S:
            skip = "missed (catch_up off)"
        if skip is None:
            return True
        if skip != "done" and tick > state.handled:
            log.info("periodic job %s: tick %s skipped: %s", spec.name, tick_label(tick, spec.tz), skip)
        state.handled = max(state.handled, tick)
        return False

    def _enqueue(self, state: _State, tick: float) -> int:
        spec = state.spec
        handler = get_handler(spec.handler)
        if handler is None:  # check_declared ran at start; a test may unregister
            raise LookupError(f"periodic job {spec.name}: no handler {spec.handler!r}")
        job, created = self.store.enqueue_idempotent(tick_job(spec, handler, tick))
        self.store.record_tick(spec.name, tick, job.id)
        state.handled = max(state.handled, tick)
        if created:
            log.info("periodic job %s: tick %s enqueued as %s", spec.name, tick_label(tick, spec.tz), job.id)
        return int(created)
