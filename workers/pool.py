"""Execution slots: a pool of threads (default) or of processes (pebble).

Both runners take a ``Running`` job and its handler, run it in a slot and
call ``done(run, outcome)`` from a pool thread when it ends (the record
stage: a nack is written, an ack posted to the main thread's inbox); the run
counts as busy until ``done`` returns, then the runner frees its slot and
calls ``freed()`` (a post to the main thread's inbox, never a call into it).

A runner takes more runs than it has slots when asked to (``free(ahead)``):
the extra ones wait in its queue, claimed ahead, and a slot starts each with
``Running.start()`` (which refuses a run dropped or released meanwhile).

* ThreadRunner: daemon threads, started lazily up to ``size``. A thread
  cannot be killed: a run the worker gave up on (timeout) keeps its slot
  until the handler returns (``abandoned`` counts those).
* ProcessRunner: pebble's ProcessPool with spawned processes, so a job can
  be killed: on its timeout (pebble kills it and reports TimeoutError) or
  when its lease is lost (the future is cancelled, which kills the process).
  A process that dies mid-job (``os._exit``, segfault) is reported as
  ``ProcessExited`` and replaced by pebble.
"""

from __future__ import annotations

import logging
import multiprocessing
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Future
from functools import partial
from typing import Protocol

from leasehold import hooks
from workers.execute import Outcome, failure, run_handler, run_in_child, timed_out
from workers.handlers import HandlerSpec
from workers.inflight import Running
from workers.progress import init_child

log = logging.getLogger(__name__)

Done = Callable[[Running, Outcome], None]


class Runner(Protocol):
    """What the worker needs of its execution slots (ThreadRunner, ProcessRunner).

    ``kills_on_timeout``: the runner stops a run at ``job.timeout_seconds``
    itself (else the worker enforces timeouts). ``claims_ahead``: it queues
    runs beyond its slots (``free(ahead)``). ``mean_run_s``: mean handler run
    time, seconds, or None when unknown."""

    kills_on_timeout: bool
    claims_ahead: bool
    mean_run_s: float | None

    def free(self, ahead: int = 0) -> int:
        """Runs it takes now: free slots, plus up to ``ahead`` runs to queue."""
        ...

    def busy(self) -> int:
        """Runs taken and not finished."""
        ...

    def holds(self, run: Running) -> bool:
        """Whether ``run`` still holds its slot (it ended, not yet freed: an ack's run)."""
        ...

    def abandoned(self, older_than_s: float = 0.0) -> int:
        """Runs given up on at least ``older_than_s`` seconds ago that still hold a slot."""
        ...

    def broken(self) -> bool:
        """True once the runner can take no more runs (the worker must be replaced)."""
        ...

    def submit(self, run: Running, spec: HandlerSpec) -> None:
        """Run ``run`` with ``spec`` in a slot; ``done(run, outcome)`` is called
        from a pool thread when it ends (also for a run that was dropped or
        released before it started: ``Outcome(dropped=True)``), then the slot
        is freed."""
        ...

    def cancel(self, run: Running) -> None:
        """Tell the run to stop (set ``ctx.cancelled``; kill it where possible)."""
        ...

    def stop(self) -> None:
        """Take no more runs and let the slots go (called once, at shutdown)."""
        ...


#: Weight of the newest run in ThreadRunner.mean_run_s (exponential moving average).
RUN_TIME_EWMA_ALPHA = 0.1


class Slots:
    """The slots of a runner, where a worker's runs are counted (the claim
    stage turns these counts into what to claim: ``ClaimLoop.free_slots``): a run
    takes one at ``submit`` and gives it back once its outcome was handed on
    (``_end``: ``done(run, outcome)``, then ``freed()``)."""

    claims_ahead: bool

    def __init__(self, size: int, done: Done, freed: Callable[[], None]) -> None:
        self.size = size
        self._done = done
        self._freed = freed
        self._busy: set[Running] = set()
        self._lock = threading.Lock()

    def free(self, ahead: int = 0) -> int:
        """Runs it takes now: free slots, plus ``ahead`` runs to queue when it
        claims ahead."""
        with self._lock:
            return self.size + (ahead if self.claims_ahead else 0) - len(self._busy)

    def busy(self) -> int:
        """Runs taken and not finished (running or waiting for a slot)."""
        with self._lock:
            return len(self._busy)

    def holds(self, run: Running) -> bool:
        with self._lock:
            return run in self._busy

    def _end(self, run: Running, outcome: Outcome) -> None:
        """Hand the outcome on, then free the slot (``done`` never raises)."""
        try:
            self._done(run, outcome)
        finally:
            with self._lock:
                self._busy.discard(run)
            self._freed()


class ThreadRunner(Slots):
    """``size`` slots served by daemon threads (they never block exit).

    ``mean_run_s``: exponential moving average of handler run time, seconds
    (None before the first run); the worker claims ahead only for short jobs."""

    kills_on_timeout = False
    claims_ahead = True

    def __init__(self, size: int, done: Done, freed: Callable[[], None]) -> None:
        super().__init__(size, done, freed)
        self._tasks: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self.mean_run_s: float | None = None

    def abandoned(self, older_than_s: float = 0.0) -> int:
        """Runs the worker gave up on (timed out, dropped or released) at least
        ``older_than_s`` seconds ago that still hold a slot."""
        limit = time.monotonic() - older_than_s
        with self._lock:
            return sum(1 for run in self._busy if run.given_up_at is not None and run.given_up_at <= limit)

    def broken(self) -> bool:
        return False

    def submit(self, run: Running, spec: HandlerSpec) -> None:
        with self._lock:
            self._busy.add(run)
            if len(self._threads) < min(self.size, len(self._busy)):
                name = f"leasehold-slot-{len(self._threads) + 1}"
                thread = threading.Thread(target=self._serve, name=name, daemon=True)
                self._threads.append(thread)
                thread.start()
        self._tasks.put(partial(self._run, run, spec))

    def _run(self, run: Running, spec: HandlerSpec) -> None:
        if not run.start():  # dropped or released while it waited for a slot
            self._end(run, Outcome(dropped=True))
            return
        hooks.send(hooks.job_started, run.job.name, job=run.job, ctx=run.ctx)
        started = time.monotonic()
        outcome = run_handler(spec, run.ctx)
        elapsed = time.monotonic() - started
        mean = self.mean_run_s
        self.mean_run_s = elapsed if mean is None else mean + RUN_TIME_EWMA_ALPHA * (elapsed - mean)
        self._end(run, outcome)

    def _serve(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            try:
                task()
            except BaseException:  # a slot must survive anything a handler does
                log.exception("job slot crashed")

    def cancel(self, run: Running) -> None:
        """Ask the handler to stop (cooperative: it should watch ``ctx.cancelled``)."""
        run.ctx.cancelled.set()

    def stop(self) -> None:
        """Let idle threads exit; busy ones are daemons and die with the process."""
        for _ in self._threads:
            self._tasks.put(None)


class ProcessRunner(Slots):
    """``size`` spawned processes; each loads the handler modules at start.
    Never claims ahead: pebble does not tell when a queued run starts."""

    kills_on_timeout = True
    claims_ahead = False
    mean_run_s: float | None = None

    def __init__(
        self,
        size: int,
        handlers: Sequence[str],
        done: Done,
        freed: Callable[[], None],
        store_url: str | None = None,
    ) -> None:
        from pebble import ProcessPool

        super().__init__(size, done, freed)
        self._pool = ProcessPool(
            max_workers=size,
            initializer=init_child,
            initargs=(list(handlers), store_url),
            context=multiprocessing.get_context("spawn"),
        )

    def abandoned(self, older_than_s: float = 0.0) -> int:
        return 0  # a process pool kills what it gives up on

    def broken(self) -> bool:
        return not self._pool.active

    def submit(self, run: Running, spec: HandlerSpec) -> None:
        with self._lock:
            self._busy.add(run)
        if not run.start():  # dropped or released before it reached the pool: never run it
            self._end(run, Outcome(dropped=True))
            return
        hooks.send(hooks.job_started, run.job.name, job=run.job, ctx=run.ctx)
        try:  # pebble times the run from here
            future = self._pool.schedule(
                run_in_child, args=(spec.name, run.ctx.fields()), timeout=run.job.timeout_seconds
            )
        except RuntimeError as exc:  # the pool broke: report it like any failed run
            self._end(run, failure("WorkerPoolBroken", f"process pool unavailable: {exc}"))
            return
        with self._lock:  # pairs with cancel(): one of the two sees the other's write
            run.future = future
            cancelled = run.ctx.cancelled.is_set()
        future.add_done_callback(partial(self._finished, run))
        if cancelled:  # cancel() came while the run was being scheduled: kill it now
            future.cancel()

    def _finished(self, run: Running, future: Future) -> None:
        try:
            outcome = future.result()
        except CancelledError:
            outcome = Outcome(dropped=True)
        except TimeoutError:
            outcome = timed_out(run.job.timeout_seconds)
        except Exception as exc:
            outcome = _crash_outcome(exc)
        self._end(run, outcome)

    def cancel(self, run: Running) -> None:
        """Stop the run: cancelling a running pebble future kills its process.
        A run whose future is not known yet is cancelled by ``submit`` as soon
        as it is (both sides look under the runner's lock)."""
        with self._lock:
            run.ctx.cancelled.set()
            future = run.future
        if future is not None:
            future.cancel()

    def stop(self) -> None:
        """Kill the pool's processes (jobs still running were released first)."""
        self._pool.stop()
        try:
            self._pool.join(timeout=10)
        except Exception:  # joining a stopped pool only waits; never block exit on it
            log.debug("process pool did not stop cleanly", exc_info=True)


def _crash_outcome(exc: BaseException) -> Outcome:
    from pebble import ProcessExpired

    if isinstance(exc, ProcessExpired):
        return failure(
            "ProcessExited", f"the job's process (pid {exc.pid}) died with exit code {exc.exitcode}"
        )
    return failure(type(exc).__name__, f"the process pool could not run the job: {exc}")
