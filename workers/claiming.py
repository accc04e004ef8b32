"""The claim loop of a worker process (``workers.worker.Worker.claims``):
the first and last stage of its pipeline (docs/architecture.md, "The worker
as a pipeline"): claim -> run (``workers.pool``) -> record.

The loop runs in the main thread and alone starts jobs. Each turn it takes
what its inbox (``workers.inbox``) holds: the completions the slots posted,
recorded in one call (``workers.recorder``; on a store that ``fetches_next``,
Redis, the same call claims the jobs for the slots they free), and the
wake-up thread's notices (a job named by one, when every slot is idle, is
leased in one round trip: ``JobStore.claim_notified``; jobs an enqueue
handed over are started or given back). Then it claims from the queue whose
turn it is (smooth weighted round robin, ``workers.claim``) a batch sized to
the free slots and hands each job to the runner. Idle, it waits on its inbox
or polls with a short backoff (5 ms -> 200 ms). A busy worker claims when
half its slots are free (or after CLAIM_LINGER_S), and ahead of its slots as
many jobs as they run in CLAIM_AHEAD_S. It stops at a stop, a broken process
pool, every slot lost to abandoned runs, or (burst mode) no job left.
"""

from __future__ import annotations

import logging
import threading
import time

from leasehold.logs import job_fields
from store.base import MAX_BATCH, JobStore
from store.models import Job
from workers.claim import IdleBackoff, WeightedQueues
from workers.config import WorkerConfig
from workers.execute import handler_missing
from workers.exits import EXIT_OK, EXIT_POOL_BROKEN, EXIT_SLOTS_LOST
from workers.flow_waits import idle_wait, parent_results
from workers.handlers import JobContext, get_handler
from workers.heartbeat import Heartbeat
from workers.inbox import Inbox
from workers.inflight import InFlight, Running
from workers.outcomes import Outcomes
from workers.pool import Runner
from workers.progress import ProgressReporter
from workers.recorder import Claim, Recorder
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
    """The claim stage of one worker, run by its main thread (``run``).
    It holds the parts it hands jobs to and takes their outcomes from (the
    runner, the outcomes, the recorder, the inbox); the worker owns them and
    the two events it shares: ``stopping`` (stop claiming, the loop ends)
    and ``quiet`` (an operator's quiet: claim nothing more). The heartbeat
    and the wake-up listener are set once the worker has started them."""

    def __init__(
        self,
        config: WorkerConfig,
        store: JobStore,
        worker_id: str,
        *,
        runner: Runner,
        inbox: Inbox,
        recorder: Recorder,
        outcomes: Outcomes,
        inflight: InFlight,
        timeouts: ExecutionTimeouts,
        progress: ProgressReporter,
        stopping: threading.Event,
        quiet: threading.Event,
    ) -> None:
        self.config = config
        self.store = store
        self.id = worker_id
        self.runner = runner
        self.inbox = inbox
        self.recorder = recorder
        self.outcomes = outcomes
        self.inflight = inflight
        self.timeouts = timeouts
        self.progress = progress
        self._stopping = stopping
        self._quiet = quiet
        self.heartbeat: Heartbeat | None = None
        self.listener: WakeupListener | None = None
        #: EXIT_OK, or why the loop ended the process (a broken pool, slots lost).
        self.exit_code = EXIT_OK
        self._queues = WeightedQueues(config.queues)
        self._idle = IdleBackoff()
        self._errors = IdleBackoff(0.1, MAX_ERROR_BACKOFF_S)
        self._last_claim = 0.0

    def run(self) -> int:
        """Claim and start jobs until stopped (or, in burst mode, drained);
        returns EXIT_OK, EXIT_POOL_BROKEN or EXIT_SLOTS_LOST."""
        self._loop()
        return self.exit_code

    def _loop(self) -> None:
        while not self._stopping.is_set():
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
            self.record_acks()
            if self._take_notices():  # a notice named its job: no claim of our own now
                self._wait(self._idle.next())
                continue
            if self._quiet.is_set():
                if self.config.burst and self._drained():
                    return
                self._wait(self._idle.next())
                continue
            free, wait_s = self._want()
            if free <= 0:
                self._wait(wait_s)
                continue
            self._last_claim = time.monotonic()
            try:
                jobs = self._claim(free)
            except Exception as exc:  # the store may come back: wait and retry
                log.warning("worker %s: claim failed: %s", self.id, exc)
                self.inbox.wait(self._errors.next())
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
            self._wait(idle_wait(self.store, self.id, self._idle.next()))

    def _wait(self, wait_s: float) -> None:
        """Wait on the inbox up to ``wait_s`` seconds, or to the next execution
        deadline; tell the wake-up thread first when a slot is free."""
        if self.listener is not None and self.wants_notices():
            self.listener.nudge()
        self.inbox.wait(self.timeouts.until_deadline(wait_s))

    def _drained(self) -> bool:
        """No run in a slot and no completion waiting (burst mode stops then).
        The completions are read first: a run counts as busy until its
        completion is posted, so a run is never between the two reads unseen."""
        return self.inbox.pending_acks() == 0 and self.runner.busy() == 0

    def _ahead(self) -> int:
        """Jobs to claim ahead of the slots: what they run in CLAIM_AHEAD_S at
        the mean run time, within [0, prefetch]; none before the first run."""
        mean = self.runner.mean_run_s
        if not self.runner.claims_ahead or mean is None:
            return 0
        if mean <= 0:
            return self.config.claim_ahead
        return min(self.config.claim_ahead, int(self.config.concurrency * CLAIM_AHEAD_S / mean))

    def free_slots(self, ending: int = 0, *, leave_to_acks: bool = True) -> int:
        """Jobs the slots could take now: the one place slots are counted
        (claims, notices and hand-overs all ask here). The runner's free
        slots and the jobs to claim ahead of them; plus ``ending``, runs
        whose completion is being recorded and whose slot may not be freed
        yet. ``leave_to_acks``: on a store that fetches next, less the slots
        whose completion waits in the inbox, since the call that records it
        claims for them (a job already leased to this worker takes any free
        slot: False)."""
        free = self.runner.free(self._ahead()) + ending
        if leave_to_acks and self.store.fetches_next and not ending:
            free -= self.inbox.pending_acks()
        return free

    def _want(self, ending: int = 0) -> tuple[int, float]:
        """``(jobs to claim now, 0)``, or ``(0, seconds to wait before asking
        again)``: claims come in batches of half the slots (and those claimed
        ahead), or after CLAIM_LINGER_S. ``ending``: see ``free_slots``."""
        batch_at = max(1, (self.config.concurrency + self._ahead()) // 2)
        free = self.free_slots(ending)
        if free <= 0:
            return 0, 1.0
        if free >= batch_at or self.runner.busy() <= ending:
            return free, 0.0
        linger = self._last_claim + CLAIM_LINGER_S - time.monotonic()
        return (free, 0.0) if linger <= 0 else (0, linger)

    def record_acks(self) -> None:
        """Record the completions waiting in the inbox, in batches; on a store
        that fetches next, the same call claims for the free slots (as
        ``_want``) and the jobs it leased start."""
        while batch := self.inbox.take_acks(MAX_BATCH):
            claim = None
            if self.store.fetches_next:
                want = 0
                if not (self._quiet.is_set() or self._stopping.is_set()):
                    ending = sum(1 for run, _ in batch if self.runner.holds(run))
                    want, _ = self._want(ending)
                first, others = self._queues.order() if want else (self._queues.names[0], [])
                if want:
                    self._last_claim = time.monotonic()
                claim = Claim([[first], others], want, self.config.lease_ttl_s)
            jobs = self.recorder.record(batch, claim)
            if jobs:
                self._idle.reset()
            for job in jobs:
                self._start(job)

    def _take_notices(self) -> bool:
        """Act on the wake-up thread's notices. Jobs the enqueue already leased
        to this worker (``Notice.leased``, hand-over) start at once, or are
        given back when the worker has no slot for them. When no slot is busy
        and a notice names its job, the job is leased in one round trip
        (``JobStore.claim_notified``). True when a notice named its job: the
        loop then makes no claim of its own this turn (when another worker
        took that job, a claim would find nothing that notice made ready, and
        with N idle workers N - 1 of them would run one for each enqueue; a
        job that became due otherwise is found by the idle poll, <= 200 ms)."""
        named = False
        for notice in self.inbox.take_notices():
            if notice.leased:
                self._start_handed(notice.leased)
                named = True
                continue
            if notice.job is None or self.runner.busy() != 0 or not self.wants_notices():
                continue
            try:
                jobs = self.store.claim_notified(self.id, notice, self.config.lease_ttl_s)
            except Exception as exc:  # the claim loop claims as usual this turn
                log.warning("worker %s: claim of a notified job failed: %s", self.id, exc)
                continue
            named = True
            if jobs:
                self._idle.reset()
            for job in jobs:
                self._start(job)
        return named

    def _start_handed(self, jobs: tuple[Job, ...]) -> None:
        """Start the jobs handed over to this worker while it has room
        (``wants_notices``); release the others (due again at once, no
        attempt spent)."""
        for job in jobs:
            if self.wants_notices():
                self._idle.reset()
                self._start(job)
            else:
                self.give_back(job)

    def give_back(self, job: Job) -> None:
        """Release a job leased to this worker that it will not run (due again
        at once, no attempt spent). A release the store never answers is
        noted (``Outcomes.unwritten``): its lease expires and recovery
        releases it then."""
        try:
            self.store.release(job.id, job.lease_token, self.id)
        except Exception as exc:
            log.warning("worker %s: release of job %s failed: %s", self.id, job.id, exc)
            self.outcomes.unwritten.append((job.id, job.lease_token))

    def wants_notices(self) -> bool:
        """Whether the wake-up thread should wait for notices: a slot is free
        and the worker claims (also called from that thread)."""
        if self._quiet.is_set() or self._stopping.is_set():
            return False
        return self.free_slots(leave_to_acks=False) > 0

    def _claim(self, free: int) -> list[Job]:
        """Claim from the queue whose turn it is; if it is empty, from the others."""
        first, others = self._queues.order()
        ttl = self.config.lease_ttl_s
        jobs = self.store.claim(self.id, [first], free, ttl)
        if not jobs and others:
            jobs = self.store.claim(self.id, others, free, ttl)
        return jobs

    def _start(self, job: Job) -> None:
        """Run ``job`` (leased to this worker by one of the loop's claims) in a slot."""
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
        self.inflight.add(run)
        if job.lease_ttl_seconds and job.lease_ttl_seconds < self.config.lease_ttl_s and self.heartbeat:
            self.heartbeat.kick()  # renew on this job's shorter rhythm
        fields = job_fields(job, self.id)
        log.debug("job %s (%s) started with token %d", job.id, job.name, job.lease_token, extra=fields)
        self.runner.submit(run, spec)
