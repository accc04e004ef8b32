"""Execution timeouts of a worker's runs. A process pool enforces them itself (pebble kills a run at
``timeout_seconds``); in a thread pool the claim loop gives up on a run past
its deadline: it sets ``ctx.cancelled`` (the thread cannot be killed), fails
the run through the retry policy (``Outcomes.time_out``) and wakes up at the
next deadline to do so (``until_deadline``)."""

from __future__ import annotations

import logging
import time

from leasehold.logs import job_fields
from workers.inflight import InFlight, State
from workers.outcomes import Outcomes
from workers.pool import Runner

log = logging.getLogger(__name__)


class ExecutionTimeouts:
    """The timeouts of one worker's runs; called from its claim loop."""

    def __init__(self, runner: Runner, inflight: InFlight, outcomes: Outcomes, worker_id: str) -> None:
        self.runner = runner
        self.inflight = inflight
        self.outcomes = outcomes
        self.worker_id = worker_id

    def enforce(self) -> None:
        """Thread pool only: give up on runs past their execution timeout."""
        if self.runner.kills_on_timeout:
            return
        now = time.monotonic()
        for run in self.inflight.running():
            if run.overdue(now) and run.move(State.TIMED_OUT):
                self.runner.cancel(run)
                log.debug(
                    "job %s timed out after %gs",
                    run.job.id,
                    run.job.timeout_seconds,
                    extra=job_fields(run.job, self.worker_id),
                )
                self.outcomes.time_out(run)

    def until_deadline(self, wait_s: float) -> float:
        """``wait_s`` seconds, shortened to wake up at the next execution deadline."""
        if self.runner.kills_on_timeout:
            return wait_s
        deadlines = [r.deadline for r in self.inflight.running()]
        if not deadlines:
            return wait_s
        return max(0.001, min(wait_s, min(deadlines) - time.monotonic()))
