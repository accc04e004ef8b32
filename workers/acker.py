"""Group commit of acks: one ``store.complete_many`` for every completion that
is waiting, instead of one ``store.complete`` per job.

Slots hand their successful runs to the acker and move on to their next job;
the acker takes everything queued (up to ``MAX_BATCH``) in one call, logs the
refused ones (LeaseLost: fencing did its job) and only then calls each run's
``finish`` (the worker forgets the run). Batching adds no waiting: an ack
alone in the queue goes at once. At most ``max_pending`` acks wait: a slot
that would add one more blocks until the acker catches up (back-pressure
when the store is slow).
Before ``complete_many`` it writes the pending progress reports of the
batch's runs (``workers.progress``: one batched call, none when no run has
one), so a completed job holds its last report.
On a store that ``fetches_next`` (Redis), with a ``Claimer`` (the worker),
the acks, those reports and the worker's next claim are one call
(``JobStore.complete_and_claim``, BullMQ's fetch-next): the worker says
which queues and how many jobs its free slots take, holding off its own
claims meanwhile, and starts what the call leased. The slots of acks still
waiting or being recorded are the acker's to fill: the claim loop does not
claim for them (it would race the call that claims for them anyway) and is
told when a batch is recorded (``Claimer.recorded``).
A store outage is retried (every ack is guarded by its token, so a retry is
safe); after the last retry the leases expire and recovery retries the jobs.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from store.base import MAX_BATCH, JobStore
from store.errors import JobNotFound, LeaseLost, StoreUnavailable, ValidationError
from store.models import Job
from workers.inflight import Running
from workers.progress import ProgressReporter
from workers.retry import OUTAGE_RETRY_DELAYS_S, retry_unavailable

log = logging.getLogger(__name__)

#: Seconds between attempts while the store is unavailable.
RETRY_DELAYS_S = OUTAGE_RETRY_DELAYS_S

Item = tuple[Running, Any, Callable[[], None]]


class Claimer(Protocol):
    """What an acker that fetches the next jobs asks of its worker
    (workers/worker.py)."""

    def claiming(self, acked: list[Running]) -> AbstractContextManager[tuple[list[list[str]], int, float]]:
        """Held while the acks' call claims (no other claim of the worker
        meanwhile): ``(queue groups in the order to try, jobs wanted (0:
        none), lease TTL s)``; the slots of the ``acked`` runs count as free."""
        ...

    def claimed(self, jobs: list[Job]) -> None:
        """Start the jobs the acks' call leased."""
        ...

    def recorded(self) -> None:
        """A batch of acks is recorded (whether its call claimed or not): the
        slots its runs freed are the claim loop's again."""
        ...


class Acker(threading.Thread):
    """The thread that records completions for one worker process."""

    def __init__(
        self,
        store: JobStore,
        worker_id: str,
        max_batch: int = MAX_BATCH,
        max_pending: int = MAX_BATCH,
        progress: ProgressReporter | None = None,
        claimer: Claimer | None = None,
    ) -> None:
        super().__init__(name="leasehold-acker", daemon=True)
        self.store = store
        self.worker_id = worker_id
        self.progress = progress
        #: Fetches the next jobs with the acks when the store does it in one call.
        self.claimer = claimer if store.fetches_next else None
        self.max_batch = max_batch
        self.max_pending = max_pending
        self._queue: deque[Item] = deque()
        self._cond = threading.Condition()
        self._stopping = False
        self._recording = 0  # acks of the batch being recorded
        self._ended = False  # the thread took its last batch: submit records in the caller
        #: ``(job id, token)`` of completions the store never answered (an outage
        #: outlasted the retries): still InProgress under that token, as far as
        #: this process knows (the worker reports them at exit).
        self.unwritten: list[tuple[str, int]] = []

    def submit(self, run: Running, result: Any, finish: Callable[[], None]) -> None:
        """Queue the completion of ``run``; ``finish()`` runs once it is recorded
        (or refused). Blocks while ``max_pending`` acks are waiting. Once the
        thread has ended (``stop()``) or before it started, the completion is
        recorded here, in the caller's thread: an ack is never left in a
        queue nobody reads."""
        with self._cond:
            while len(self._queue) >= self.max_pending and not self._stopping and self.is_alive():
                self._cond.wait(0.1)
            inline = self._ended or not self.is_alive()
            if not inline:
                self._queue.append((run, result, finish))
                self._cond.notify_all()
        if inline:
            self._settle([(run, result, finish)])

    def pending(self) -> int:
        """Acks queued or being recorded."""
        with self._cond:
            return len(self._queue) + self._recording

    def stop(self, timeout_s: float = 30.0) -> None:
        """Record what is queued, then end the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self.is_alive():
            self.join(timeout_s)

    def run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue:
                    self._ended = True
                    return
                batch = [self._queue.popleft() for _ in range(min(len(self._queue), self.max_batch))]
                self._recording = len(batch)
                self._cond.notify_all()  # slots blocked on max_pending may go on
            try:
                self._settle(batch)
            finally:
                with self._cond:
                    self._recording = 0
                if self.claimer is not None:
                    self.claimer.recorded()

    def _settle(self, batch: list[Item]) -> None:
        """Record ``batch`` then call each item's ``finish``; never raises."""
        try:
            self._record(batch)
        except Exception:  # never lose the thread; the leases expire and recovery retries
            log.exception("worker %s: recording %d completions failed", self.worker_id, len(batch))
            self.unwritten.extend(run.key for run, _, _ in batch)
        finally:
            for _, _, finish in batch:
                try:
                    finish()
                except Exception:
                    log.exception("worker %s: freeing a slot failed", self.worker_id)

    def _record(self, batch: list[Item]) -> None:
        acks = [(run.job.id, run.job.lease_token, result) for run, result, _ in batch]
        keys = [(job_id, token) for job_id, token, _ in acks]
        claimer = self.claimer
        reports = self.progress.take(keys) if claimer is not None and self.progress is not None else []

        def record() -> list[Job | LeaseLost | None]:
            if claimer is not None:  # acks, their last reports and the next claim in one call
                with claimer.claiming([run for run, _, _ in batch]) as (queues, want, ttl_s):
                    outcomes, jobs = self.store.complete_and_claim(
                        acks, self.worker_id, queues, want, ttl_s, progress=reports
                    )
                    claimer.claimed(jobs)
                return list(outcomes)
            if self.progress is not None:  # the last reports first; put back if the store is out
                self.progress.flush(keys)
            return self.store.complete_many(acks, worker_id=self.worker_id, return_jobs=False)

        outcomes: list[object]
        try:
            outcomes = list(
                retry_unavailable(record, RETRY_DELAYS_S, f"worker {self.worker_id}: recording completions")
            )
        except ValidationError:  # some result the store will not take: ack one by one
            if reports and self.progress is not None:
                self.progress.restore(reports, self.worker_id)
                self.progress.flush(keys)
            outcomes = [self._one(*ack) for ack in acks]
        except StoreUnavailable as exc:
            log.error("worker %s: could not record %d completions (%s)", self.worker_id, len(acks), exc)
            self.unwritten.extend(keys)
            return
        for (job_id, _, _), outcome in zip(acks, outcomes, strict=True):
            if isinstance(outcome, LeaseLost):
                log.info("worker %s: completion refused, %s", self.worker_id, outcome)
            else:
                log.debug("job %s completed", job_id, extra={"job_id": job_id, "worker_id": self.worker_id})

    def _one(self, job_id: str, token: int, result: Any) -> object:
        try:
            return self.store.complete(job_id, token, result, worker_id=self.worker_id)
        except LeaseLost as lost:
            return lost
        except JobNotFound:
            return LeaseLost(job_id, token, None, None)
        except ValidationError as exc:
            error = {
                "type": "ResultNotJSON",
                "message": f"the store refused the result: {exc}",
                "traceback": None,
            }
            try:
                return self.store.fail(job_id, token, error, permanent=True, worker_id=self.worker_id)
            except LeaseLost as lost:
                return lost
