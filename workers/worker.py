"""One worker process: register, drain recovery, claim, run, ack/nack, shut down.

The worker is a pipeline that flows one way (docs/architecture.md, "The
worker as a pipeline"): the main thread claims (``workers.claiming``: when
to claim, how many, from which queue) and hands jobs to the slots
(``workers.pool``); a slot runs one and hands its outcome on
(``workers.outcomes``: a nack written at once, a completion posted to the
main thread's inbox, ``workers.inbox``); the main thread records the
completions it finds there in batches (``workers.recorder``; on Redis in
the call that claims the next jobs). Every write carries the job's fencing
token. A job's execution timeout starts when a slot starts it. This module
registers the worker, starts and stops the threads around the loop, and
shuts down.

Beside it run the heartbeat thread (``workers.heartbeat``: leases, the
registry entry, and an operator's quiet or stop command found there), the
progress flusher (``workers.progress``, once a handler reports), the
recovery service (``store.recovery_run``) and, unless in burst mode, the
maintenance service (``store.maintenance``: retention, dead workers, history,
bulk operations) and the scheduler of periodic jobs (``workers.scheduler``).

Timeouts (``workers.timeouts``): pebble kills a process-pool run at
``timeout_seconds``; a thread cannot be killed, so the loop sets
``ctx.cancelled``, fails the job (JobTimeout) and stops waiting, and the
abandoned thread keeps its slot until the handler returns. When every slot has been held for a lease TTL by
runs it gave up on, the worker exits with EXIT_SLOTS_LOST to be replaced.

Shutdown (first SIGTERM/SIGINT, ``stop()``, an operator's stop, or burst mode
running dry): stop claiming, give running jobs ``grace_s`` to finish (their
completions recorded as they come), release the rest (back to the queue at
once, not a failure), close the inbox and record what it holds (leases still
renewed), give back jobs handed over meanwhile, write the pending progress
reports, stop the heartbeat, leave the registry; exit with EXIT_UNRECORDED,
naming them, when jobs it claimed are
still InProgress under its token (docs/architecture.md, "Shutdown"). A
second signal exits at once. A burst worker runs no wake-up listener.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from typing import Any

from leasehold.urls import is_sql
from store import open_store
from store.base import MAX_BATCH, JobStore
from store.errors import JobNotFound
from store.lifecycle import JobStatus
from store.models import WorkerInfo, ts
from workers.catalogue import published
from workers.claiming import ClaimLoop
from workers.config import WorkerConfig
from workers.exits import EXIT_FORCED, EXIT_OK, EXIT_STOPPED, EXIT_UNRECORDED
from workers.handlers import unserved_handlers
from workers.heartbeat import Heartbeat
from workers.inbox import Inbox
from workers.inflight import InFlight, Running, State
from workers.outcomes import Outcomes
from workers.periodic import check_declared
from workers.pool import ProcessRunner, Runner, ThreadRunner
from workers.progress import ProgressReporter
from workers.recorder import Recorder
from workers.scheduler import Scheduler
from workers.services import MaintenanceService, RecoveryService
from workers.timeouts import ExecutionTimeouts
from workers.wakeup import WAIT_S, WakeupListener

log = logging.getLogger(__name__)


#: Longest wait at shutdown for the heartbeat's last beat and the removal of
#: the registry entry that follows it, seconds.
HEARTBEAT_JOIN_S = 10.0
#: Longest wait at shutdown for completions posted as the inbox closed
#: (recorded by their slot threads), seconds.
ACK_FLUSH_S = 30.0
#: Seconds shutdown waits for the wake-up thread: one blocking wait, and the
#: release of a job handed over as the worker stopped.
LISTENER_JOIN_S = WAIT_S + 1.0


def open_worker_store(config: WorkerConfig, connections: int) -> JobStore:
    """This process's own store, with a connection pool sized for its threads."""
    if is_sql(config.store_url):
        return open_store(config.store_url, config.store, pool_size=connections)
    return open_store(config.store_url, config.store)


class Worker:
    """A worker process's main object. ``run()`` blocks until it stops."""

    def __init__(self, config: WorkerConfig, store: JobStore, *, install_signals: bool = True) -> None:
        self.config = config
        self.store = store
        self.id = config.worker_id()
        self.install_signals = install_signals
        self.inflight = InFlight()
        self.exit_code = EXIT_OK
        #: Jobs this worker left InProgress under its token at exit (named in its
        #: last ERROR line; EXIT_UNRECORDED): set by the shutdown.
        self.unrecorded: list[str] = []
        self._stopping = threading.Event()
        self._signals = 0
        self.progress = ProgressReporter(store, job_log_lines=config.job_log_lines)
        #: What the main thread is told: completions, notices, wake-ups (workers/inbox.py).
        self.inbox = Inbox(MAX_BATCH)
        self.recorder = Recorder(store, self.id, self.inflight, self.progress, config.queue_names[0])
        self.outcomes = Outcomes(
            store,
            self.id,
            self.inflight,
            self.inbox,
            self.recorder,
            self.progress,
            log_success=config.log_success,
        )
        self.runner: Runner
        if config.pool == "process":
            self.runner = ProcessRunner(
                config.concurrency, config.handlers, self.outcomes.done, self.inbox.wake, config.store_url
            )
        else:
            self.runner = ThreadRunner(config.concurrency, self.outcomes.done, self.inbox.wake)
        self.timeouts = ExecutionTimeouts(self.runner, self.inflight, self.outcomes, self.id)
        #: Set by an operator's "quiet": claim nothing more, finish what is held.
        self._quiet = threading.Event()
        #: The claim stage (workers/claiming.py), run by the main thread.
        self.claims = ClaimLoop(
            config,
            store,
            self.id,
            runner=self.runner,
            inbox=self.inbox,
            recorder=self.recorder,
            outcomes=self.outcomes,
            inflight=self.inflight,
            timeouts=self.timeouts,
            progress=self.progress,
            stopping=self._stopping,
            quiet=self._quiet,
        )
        self.heartbeat: Heartbeat | None = None
        self.recovery: RecoveryService | None = None
        self.maintenance: MaintenanceService | None = None
        self.scheduler: Scheduler | None = None
        self.listener: WakeupListener | None = None

    # ------------------------------------------------------------ control
    def stop(self) -> None:
        """Ask for a graceful stop (thread-safe)."""
        self._stopping.set()
        self.inbox.wake()

    def on_command(self, command: str) -> None:
        """An operator's command, picked up by the heartbeat from the
        registry: ``quiet`` stops claiming (what is held finishes),
        ``unquiet`` takes a quiet back (claims resume), ``stop`` is the
        graceful path of SIGTERM and makes the process exit with
        EXIT_STOPPED (a supervisor does not replace it). Called from the
        heartbeat thread. The log line is written once the command has
        taken effect."""
        if command == "quiet":
            self._quiet.set()
            if self.listener is not None:  # no enqueue hands it a job from now on
                self.listener.withdraw()
        elif command == "unquiet":
            self._quiet.clear()
        elif command == "stop":
            if self.exit_code == EXIT_OK:
                self.exit_code = EXIT_STOPPED
            self.stop()
        self.inbox.wake()
        log.info("worker %s: operator command %r", self.id, command)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._signals += 1
        if self._signals > 1:
            os.write(2, f"worker {self.id}: second {signal.Signals(signum).name}, exiting now\n".encode())
            os._exit(EXIT_FORCED)
        log.info(
            "worker %s: %s received, stopping (grace %gs; send it again to exit at once)",
            self.id,
            signal.Signals(signum).name,
            self.config.grace_s,
        )
        self.stop()

    # ---------------------------------------------------------------- run
    def run(self) -> int:
        """Serve until stopped; returns the process exit code."""
        if self.install_signals:
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
        try:
            self._register()
            if self.config.recovery_enabled:
                self.recovery = RecoveryService(
                    self.store,
                    self.id,
                    self.config.recovery_interval_s,
                    self.config.recovery_batch,
                    self.config.recovery_lock_ttl_s,
                )
                self.recovery.drain()
                self.recovery.start()
            if self.config.maintenance_enabled and not self.config.burst:
                self.maintenance = MaintenanceService(
                    self.store,
                    self.id,
                    self.config.maintenance_interval_s,
                    self.config.retention,
                    self.config.worker_forget_after_s,
                    self.config.audit_retention_s,
                )
                self.maintenance.start()
            periodic_jobs = [] if self.config.burst or self._stopping.is_set() else check_declared()
            if periodic_jobs:
                self.scheduler = Scheduler(self.store, self.id, periodic_jobs)
                self.scheduler.start_up()
                self.scheduler.start()
            code = self.claims.run()
            if code != EXIT_OK:
                self.exit_code = code
        finally:
            self._shutdown()
        return self.exit_code

    def _register(self) -> None:
        """Enter the registry and start the heartbeat and wake-up threads."""
        info = WorkerInfo(
            id=self.id,
            host=socket.gethostname(),
            pid=os.getpid(),
            queues=self.config.queue_names,
            concurrency=self.config.concurrency,
            started_at=ts(self.store.now()),  # the store's clock, like every other time
            handlers=published(self.config.queue_names, self.config.lease_ttl_s),
        )
        self.store.worker_heartbeat(info, register=True)  # clears a command left for a predecessor
        log.info(
            "worker %s started: queues %s, %d %s slot(s), lease %gs",
            self.id,
            ",".join(f"{n}:{w}" for n, w in self.config.queues),
            self.config.concurrency,
            self.config.pool,
            self.config.lease_ttl_s,
        )
        for spec in unserved_handlers(self.config.queue_names):
            log.warning(
                "worker %s: handler %r takes jobs on queue %r, which this worker does not serve",
                self.id,
                spec.name,
                spec.queue,
            )
        self.heartbeat = Heartbeat(
            self.store, info, self.inflight, self.config.lease_ttl_s, self.runner.cancel, self.on_command
        )
        self.heartbeat.start()
        self.claims.heartbeat = self.heartbeat
        # A burst worker drains and exits: it neither waits for notices nor
        # registers for hand-over (an enqueue must not lease a job to a
        # worker about to leave), so its claim loop alone claims.
        wakeups = (
            None
            if self.config.burst
            else self.store.wakeups(self.config.queue_names, self.id, self.config.lease_ttl_s)
        )
        if wakeups is not None:
            self.listener = WakeupListener(wakeups, self.inbox.notice, self.id, self.claims.wants_notices)
            self.claims.listener = self.listener
            self.listener.start()

    # ----------------------------------------------------------- shutdown
    def _shutdown(self) -> None:
        self._stopping.set()
        if self.recovery is not None:
            self.recovery.stop()
        if self.maintenance is not None:
            self.maintenance.stop()
        if self.scheduler is not None:
            self.scheduler.stop()
        if self.listener is not None:
            self.listener.stop()
        for run in self.inflight.running():  # claimed ahead, never started: back at once
            if run.release_if_waiting():
                self._release(run)
        grace_end = time.monotonic() + self.config.grace_s
        while self.inflight.running() and time.monotonic() < grace_end:
            self.timeouts.enforce()
            self.claims.record_acks()  # the runs finishing meanwhile (no claim: the worker stops)
            self._give_back_handed()
            wait_s = max(0.0, grace_end - time.monotonic())
            self.inbox.wait(self.timeouts.until_deadline(min(0.1, wait_s)))
        for run in self.inflight.running():
            if run.move(State.RELEASED):
                self._release(run)
        # Close the inbox: what it holds is recorded (or given back) here, and a
        # completion posted later is recorded by its slot's thread. The
        # heartbeat keeps renewing the leases of finished runs until they are
        # recorded (a slow write must not outlive the lease), and stops only then.
        acks, notices = self.inbox.close()
        if acks:
            self.recorder.record(acks)
        for notice in notices:
            for job in notice.leased:
                self.claims.give_back(job)
        self._wait_for_acks()
        self.progress.close()  # reports of runs still going when released, or refused late
        # The heartbeat thread removes the registry entry after its last beat
        # has returned, so a beat in flight cannot register this worker again.
        if self.heartbeat is not None:
            self.heartbeat.stop(leave=True)
            self.heartbeat.join(timeout=HEARTBEAT_JOIN_S)
            if self.heartbeat.is_alive():
                log.warning(
                    "worker %s: the heartbeat is still waiting for the store after %gs; "
                    "the registry entry goes when it returns, or ages out",
                    self.id,
                    HEARTBEAT_JOIN_S,
                )
        else:
            Heartbeat.leave_registry(self.store, self.id)
        if self.listener is not None:  # a job handed over as it stopped is being released
            self.listener.join(timeout=LISTENER_JOIN_S)
        self.runner.stop()
        self._check_recorded()
        log.info("worker %s stopped", self.id)

    def _give_back_handed(self) -> None:
        """Give back the jobs handed over to this worker as it stops."""
        for notice in self.inbox.take_notices():
            for job in notice.leased:
                self.claims.give_back(job)

    def _release(self, run: Running) -> None:
        self.outcomes.release(run)
        self.runner.cancel(run)

    def _wait_for_acks(self) -> None:
        """Wait (at most ACK_FLUSH_S) for runs that ended as the inbox closed:
        their slot threads record the completions themselves (``Outcomes.done``)."""
        end = time.monotonic() + ACK_FLUSH_S
        while any(run.state is State.DONE for run in self.inflight.all()) and time.monotonic() < end:
            self.inbox.wait(0.05)  # a freed slot wakes it

    def _check_recorded(self) -> None:
        """Exit with EXIT_UNRECORDED, naming them, when jobs this worker claimed
        are still InProgress under its token in the store: an ack, nack or
        release the store never answered, or a run that outlived the flush.
        Each is read back first (a later retry, or recovery, may have
        settled it); a job that cannot be read counts as unrecorded."""
        keys = dict.fromkeys(
            [*self.recorder.unwritten, *self.outcomes.unwritten]
            + [run.key for run in self.inflight.all() if run.state is State.DONE]
        )
        held = []
        for job_id, token in keys:
            try:
                job = self.store.get(job_id)
            except JobNotFound:
                continue
            except Exception:  # the store is still out: nothing says the job was settled
                held.append(job_id)
                continue
            if job.status is JobStatus.InProgress and job.lease_token == token:
                held.append(job_id)
        self.unrecorded = held
        if held:
            log.error(
                "worker %s: stopping with %d claimed job(s) still InProgress under its lease "
                "(their ack or release was not written; recovery runs them again when the lease expires): %s",
                self.id,
                len(held),
                ", ".join(held),
            )
            if self.exit_code == EXIT_OK:
                self.exit_code = EXIT_UNRECORDED


def run_worker(config: WorkerConfig, *, install_signals: bool = True) -> int:
    """Open the store, run one worker until it stops; returns the exit code."""
    store = open_worker_store(config, connections=config.concurrency + 4)
    try:
        return Worker(config, store, install_signals=install_signals).run()
    finally:
        store.close()
