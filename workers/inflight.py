"""The jobs a worker holds a lease on, and who may write each one's outcome.

A ``Running`` job moves from RUNNING to exactly one of:

* DONE: the handler returned; its thread acks or nacks.
* TIMED_OUT: the worker failed it (JobTimeout) and stopped waiting for it.
* DROPPED: a heartbeat was refused (lease lost, job canceled); the handler is
  told to stop and whatever it returns is discarded (never acked).
* RELEASED: shutdown gave the lease back.

A claimed run may wait in the runner's queue before a slot starts it (claim
ahead, ``workers.worker``); ``start()`` marks the moment its execution timeout
begins, and refuses a run that was already dropped or released meanwhile.

The move is a compare-and-set under the job's lock, so the handler's thread
and the worker never both record an outcome for one run. Heartbeats renew
the leases of RUNNING jobs only.
"""

from __future__ import annotations

import enum
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from store.models import Job, Lease
from workers.handlers import JobContext


class State(enum.Enum):
    RUNNING = "running"
    DONE = "done"
    TIMED_OUT = "timed_out"
    DROPPED = "dropped"
    RELEASED = "released"


@dataclass(eq=False)
class Running:
    """One run of one job: the job as claimed, its context, its deadline.

    ``deadline`` is ``time.monotonic()`` seconds (a local duration, never
    compared with the store's clock): infinite until ``start()``, then start
    + ``job.timeout_seconds``. ``settled`` is set once the worker's
    own write for a TIMED_OUT or RELEASED run has finished, so the handler's
    late ack goes to the store after it and is refused by fencing.
    ``outcome_written`` (read after ``settled``) says whether the store
    answered that write; if not, the job may still be InProgress under this
    token and a late result must not be recorded (``workers.outcomes``)."""

    job: Job
    ctx: JobContext
    deadline: float = math.inf
    state: State = State.RUNNING
    started: bool = False
    started_at: float = math.inf  # time.monotonic() when a slot started it
    _settled: threading.Event | None = None
    future: Any = None  # the process pool's future, when there is one
    outcome_written: bool = False
    given_up_at: float | None = None  # time.monotonic() when it left RUNNING for anything but DONE
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def settled(self) -> threading.Event:
        """Made on first use: only timed-out and released runs need it."""
        with self._lock:
            if self._settled is None:
                self._settled = threading.Event()
            return self._settled

    @property
    def key(self) -> tuple[str, int]:
        return (self.job.id, self.job.lease_token)

    @property
    def lease(self) -> Lease:
        return Lease(self.job.id, self.job.lease_token)

    def move(self, to: State) -> bool:
        """RUNNING -> ``to``; False when another outcome already won."""
        with self._lock:
            if self.state is not State.RUNNING:
                return False
            self.state = to
            if to is not State.DONE:
                self.given_up_at = time.monotonic()
            return True

    def start(self) -> bool:
        """A slot begins the handler now; False (do not run it) when the run
        already left RUNNING (dropped, released) while it waited for a slot."""
        with self._lock:
            if self.state is not State.RUNNING:
                return False
            self.started = True
            self.started_at = time.monotonic()
            self.deadline = self.started_at + self.job.timeout_seconds
            return True

    def release_if_waiting(self) -> bool:
        """RUNNING and not started -> RELEASED (shutdown gives back claimed-ahead
        runs at once); False when a slot already started it."""
        with self._lock:
            if self.state is not State.RUNNING or self.started:
                return False
            self.state = State.RELEASED
            self.given_up_at = time.monotonic()
            return True

    def overdue(self, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) >= self.deadline


class InFlight:
    """Thread-safe set of the runs a worker holds, keyed by (job id, token)."""

    def __init__(self) -> None:
        self._runs: dict[tuple[str, int], Running] = {}
        self._lock = threading.Lock()

    def add(self, run: Running) -> None:
        with self._lock:
            self._runs[run.key] = run

    def remove(self, run: Running) -> None:
        with self._lock:
            self._runs.pop(run.key, None)

    def all(self) -> list[Running]:
        with self._lock:
            return list(self._runs.values())

    def running(self) -> list[Running]:
        """Runs still RUNNING."""
        return [r for r in self.all() if r.state is State.RUNNING]

    def leased(self) -> list[Running]:
        """Runs whose leases the worker renews: RUNNING, and DONE ones whose
        completion waits to be recorded (a slow or retried ack must not let
        the lease of finished work expire)."""
        return [r for r in self.all() if r.state in (State.RUNNING, State.DONE)]

    def get(self, lease: Lease) -> Running | None:
        with self._lock:
            return self._runs.get((lease.job_id, lease.token))

    def __len__(self) -> int:
        with self._lock:
            return len(self._runs)
