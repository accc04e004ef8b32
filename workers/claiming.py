"""The claim loop of a worker process (``workers.worker.Worker`` is one):
when to claim, how many, from which queue, and how a claimed job starts.

The loop runs in the main thread: it picks a queue by smooth weighted round
robin (``workers.claim``), claims a batch sized to the free slots and hands
each job to the runner (``workers.pool``). Idle, it waits for the store's
wake-up (``workers.wakeup``) or polls with a short backoff (5 ms -> 200 ms);
a notice that names one job, when every slot is idle, is leased in one round
trip and started by the wake-up thread itself (``JobStore.claim_notified``).
A busy worker claims when half its slots are free (or after CLAIM_LINGER_S),
and ahead of its slots as many jobs as they run in CLAIM_AHEAD_S; on a store
that ``fetches_next`` (Redis) that batch is claimed by the acker's call that
acks the runs freeing the slots (``claiming``, one claim at a time). It
stops at a stop, a broken process pool, every slot lost to abandoned runs,
or (burst mode) no job left.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator

from leasehold.logs import job_fields
from store.base import JobStore, Notice
from store.models import Job
from workers.acker import Acker
from workers.claim import IdleBackoff, WeightedQueues
from workers.config import WorkerConfig
from workers.execute import handler_missing
from workers.exits import EXIT_POOL_BROKEN, EXIT_SLOTS_LOST
from workers.flow import idle_wait, parent_results
from workers.handlers import JobContext, get_handler
from workers.heartbeat import Heartbeat
from workers.inflight import InFlight, Running
from workers.outcomes import Outcomes
from workers.pool import Runner
from workers.progress import ProgressReporter
from workers.timeouts import ExecutionTimeouts
from workers.wakeup import WakeupListener

log = logging.getLogger("workers.worker")

#: Least time, seconds, a run the worker gave up on (timeout, lost lease) may
#: keep its slot before the slot counts as lost; it gets one lease TTL to
#: notice ``ctx.cancelled``.
MIN_ABANDONED_GRACE_S = 1.0
#: Longest wait between claims after a store error, seconds.
MAX_ERROR_BACKOFF_S = 5.0
#: Longest a free slot waits for more to free before a claim, seconds (a busy
#: worker claims when half its slots are free, so claims come in batches).
CLAIM_LINGER_S = 0.01
#: Work claimed ahead of the slots, in seconds of mean run time: a job claimed
#: ahead waits about this long for a slot (long jobs are not claimed ahead).
CLAIM_AHEAD_S = 0.05


class ClaimLoop:
    """The claim loop's half of a Worker: the attributes below are the
    Worker's (set in its ``__init__``)."""

    config: WorkerConfig
    store: JobStore
    id: str
    inflight: InFlight
    exit_code: int
    runner: Runner
    timeouts: ExecutionTimeouts
    outcomes: Outcomes
    progress: ProgressReporter
    acker: Acker
    heartbeat: Heartbeat | None
    listener: WakeupListener | None
    _stopping: threading.Event
    _wakeup: threading.Event
    _quiet: threading.Event
    _claiming: threading.Lock
    _admit: threading.Lock
    _closed: bool
    _queues: WeightedQueues
    _idle: IdleBackoff
    _errors: IdleBackoff
    _last_claim: float
    _ahead_now: int
    _claim_at: int

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self._wakeup.clear()
            self.timeouts.enforce()
            if self.runner.broken():
                log.error("worker %s: the process pool is broken; exiting to be replaced", self.id)
                self.exit_code = EXIT_POOL_BROKEN
                return
            grace_s = max(MIN_ABANDONED_GRACE_S, self.config.lease_ttl_s)
            if self.runner.abandoned(grace_s) >= self.config.concurrency:
                log.error(
                    "worker %s: every slot is held by a job it gave up on; exiting to be replaced", self.id
                )
                self.exit_code = EXIT_SLOTS_LOST
                return
            if self._quiet.is_set():
                if self.config.burst and self._drained():
                    return
                self._wakeup.wait(self.timeouts.until_deadline(self._idle.next()))
                continue
            free, wait_s = self._want()
            if free <= 0:
                self._wakeup.wait(self.timeouts.until_deadline(wait_s))
                continue
            self._last_claim = time.monotonic()
            try:
                jobs = self._claim(free)
            except Exception as exc:  # the store may come back: wait and retry
                log.warning("worker %s: claim failed: %s", self.id, exc)
                self._wakeup.wait(self._errors.next())
                continue
            self._errors.reset()
            if jobs:
                self._idle.reset()
                for job in jobs:
                    self._start(job)
                continue
            if self.config.burst and self._drained():
                log.info("worker %s: no job left (burst), stopping", self.id)
                return
            self._wakeup.wait(self.timeouts.until_deadline(idle_wait(self.store, self.id, self._idle.next())))

    def _drained(self) -> bool:
        """No run in a slot and no ack waiting (burst mode stops then). The
        acks are read first: a run counts as busy until its ack is queued,
        and an ack as pending until the jobs its call claimed (fetch-next)
        have started, so a run is never between the two reads unseen."""
        return self.acker.pending() == 0 and self.runner.busy() == 0

    def _ahead(self) -> int:
        """Jobs to claim ahead of the slots: what they run in CLAIM_AHEAD_S at
        the mean run time, within [0, prefetch]; none before the first run."""
        mean = self.runner.mean_run_s
        if not self.runner.claims_ahead or mean is None:
            return 0
        if mean <= 0:
            return self.config.claim_ahead
        return min(self.config.claim_ahead, int(self.config.concurrency * CLAIM_AHEAD_S / mean))

    def _want(self) -> tuple[int, float]:
        """``(jobs to claim now, 0)``, or ``(0, seconds to wait before asking again)``."""
        ahead = self._ahead()
        batch_at = max(1, (self.config.concurrency + ahead) // 2)
        self._ahead_now, self._claim_at = ahead, batch_at
        free = self.runner.free(ahead)
        if self.acker.claimer is not None:  # the acks' own call claims for the slots they freed
            free -= self.acker.pending()
        if free <= 0:
            return 0, 1.0
        if free >= batch_at or self.runner.busy() == 0:
            return free, 0.0
        linger = self._last_claim + CLAIM_LINGER_S - time.monotonic()
        return (free, 0.0) if linger <= 0 else (0, linger)

    def _slot_freed(self) -> None:
        """A run gave its slot back (called from a pool thread). Wake the claim
        loop only when enough slots are free to claim a batch, or none is
        busy (burst mode's end, shutdown): not once per job; nor while acks
        are being recorded by an acker that claims with them (fetch-next)."""
        acker_claims = self.acker.claimer is not None and self.acker.pending() > 0
        if self.runner.busy() == 0 or (
            not acker_claims and self.runner.free(self._ahead_now) >= self._claim_at
        ):
            self._wakeup.set()
        if self.listener is not None:
            self.listener.nudge()

    def _on_notice(self, notice: Notice) -> None:
        """A job became ready on one of our queues (called from the wake-up
        thread). Jobs the enqueue already leased to this worker
        (``Notice.leased``, hand-over) start at once, or are released when
        the worker stops or has no slot for them. When no slot is busy and
        the notice names the job, this thread leases it in one round trip
        (``JobStore.claim_notified``) and starts it, with no hand-over to the
        claim loop (when another worker took it first, nothing more: that
        job was all the notice announced); otherwise the claim loop wakes
        and claims as usual (a busy worker claims in batches)."""
        if notice.leased:
            self._start_handed(notice.leased)
            return
        if notice.job is not None and self.runner.busy() == 0 and self._wants_notices():
            try:
                jobs = self.store.claim_notified(self.id, notice, self.config.lease_ttl_s)
            except Exception as exc:  # the claim loop tries again as usual
                log.warning("worker %s: claim of a notified job failed: %s", self.id, exc)
            else:
                for job in jobs:
                    self._start(job)
                # None: another worker leased the one job the notice named (each
                # PostgreSQL listener gets every notice), or its queue is paused
                # or its limits admit nothing (JobStore.claim_notified). A claim
                # now would find nothing that notice made ready, and with N idle
                # workers N - 1 of them would run one for each enqueue; a job that
                # became due otherwise is found by the idle poll (<= 200 ms).
                return
        self._wakeup.set()

    def _start_handed(self, jobs: tuple[Job, ...]) -> None:
        """Start the jobs handed over to this worker while it has room
        (``_wants_notices``); release the others (due again at once, no
        attempt spent)."""
        for job in jobs:
            if self._wants_notices():
                self._idle.reset()
                self._start(job)
            else:
                self._give_back(job)

    def _give_back(self, job: Job) -> None:
        """Release a job leased to this worker that it will not run (due again
        at once, no attempt spent). A release the store never answers is
        noted (``Outcomes.unwritten``): its lease expires and recovery
        releases it then."""
        try:
            self.store.release(job.id, job.lease_token, self.id)
        except Exception as exc:
            log.warning("worker %s: release of job %s failed: %s", self.id, job.id, exc)
            self.outcomes.unwritten.append((job.id, job.lease_token))

    def _wants_notices(self) -> bool:
        """Whether the wake-up thread should wait for notices: a slot is free
        and the worker claims (called from that thread)."""
        if self._quiet.is_set() or self._stopping.is_set():
            return False
        return self.runner.free(self._ahead_now) > 0

    def _claim(self, free: int) -> list[Job]:
        """Claim from the queue whose turn it is; if it is empty, from the others."""
        with self._claiming:
            first, others = self._queues.order()
            ttl = self.config.lease_ttl_s
            jobs = self.store.claim(self.id, [first], free, ttl)
            if not jobs and others:
                jobs = self.store.claim(self.id, others, free, ttl)
            return jobs

    @contextlib.contextmanager
    def claiming(self, acked: list[Running]) -> Iterator[tuple[list[list[str]], int, float]]:
        """The acker's claim with its acks (``acker.Claimer``): the queue whose
        turn it is then the others, as ``_claim``, for every free slot, the
        acked runs' counted free even before their slot threads free them;
        none while quiet or stopping, or while fewer slots than a batch are
        free and some still run (as ``_want``: claims come in batches). The
        claim loop's claims wait meanwhile."""
        with self._claiming:
            free = 0
            if not (self._quiet.is_set() or self._stopping.is_set()):
                ending = sum(1 for run in acked if self.runner.holds(run))
                ahead = self._ahead()
                free = max(0, self.runner.free(ahead) + ending)
                if free < max(1, (self.config.concurrency + ahead) // 2) and self.runner.busy() > ending:
                    free = 0
            first, others = self._queues.order() if free else (self._queues.names[0], [])
            if free:
                self._last_claim = time.monotonic()
            yield [[first], others], free, self.config.lease_ttl_s

    def recorded(self) -> None:
        """The acker recorded a batch (``acker.Claimer``): wake the claim loop
        for the slots its call did not fill."""
        self._wakeup.set()

    def claimed(self, jobs: list[Job]) -> None:
        """Start the jobs the acker's call leased (``acker.Claimer``)."""
        if jobs:
            self._idle.reset()
        for job in jobs:
            self._start(job)

    def _start(self, job: Job) -> None:
        """Run ``job`` (leased to this worker by any of its claims) in a slot;
        once the shutdown has closed admission (``_closed``) give it back
        instead: the shutdown waits for or releases exactly the runs it
        admitted, so a claim that returns late never runs unseen."""
        spec = get_handler(job.name)
        run = Running(job, JobContext.for_job(job, self.id, self.progress))
        if job.pending_parents is not None:  # only a job that waited pays for the read
            run.ctx.parents = parent_results(self.store, job.id)
        if spec is None:  # another worker may have it (a rolling deploy): back, not failed, for a while
            missing = handler_missing(
                job, self.id, self.config.unknown_handler_grace_s, self.config.store.retry
            )
            self.outcomes.fail(run, missing)
            return
        with self._admit:
            admitted = not self._closed
            if admitted:
                self.inflight.add(run)
        if not admitted:
            log.info("worker %s: job %s leased as it stopped; giving it back", self.id, job.id)
            self._give_back(job)
            return
        if job.lease_ttl_seconds and job.lease_ttl_seconds < self.config.lease_ttl_s and self.heartbeat:
            self.heartbeat.kick()  # renew on this job's shorter rhythm
        fields = job_fields(job, self.id)
        log.debug("job %s (%s) started with token %d", job.id, job.name, job.lease_token, extra=fields)
        self.runner.submit(run, spec)
