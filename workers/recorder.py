"""Group commit of acks: one ``store.complete_many`` for every completion that
is waiting, instead of one ``store.complete`` per job.

The main thread (``workers.claiming``) takes the completions the slots posted
to its inbox (``workers.inbox``, up to ``MAX_BATCH``) and records them here
in one call, logs the refused ones (LeaseLost: fencing did its job) and
forgets the runs. Batching adds no waiting: an ack alone goes at once.
Before ``complete_many`` it writes the pending progress reports of the
batch's runs (``workers.progress``: one batched call, none when no run has
one), so a completed job holds its last report.
On a store that ``fetches_next`` (Redis) the acks, those reports and the
worker's next claim are one call (``JobStore.complete_and_claim``, BullMQ's
fetch-next): the caller says which queues and how many jobs its free slots
take (``Claim``) and starts what the call leased.
A store outage is retried (every ack is guarded by its token, so a retry is
safe); after the last retry the leases expire and recovery retries the jobs,
and the completions are noted in ``unwritten`` (the worker names them at exit).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

from store.base import JobStore
from store.errors import JobNotFound, LeaseLost, StoreUnavailable, ValidationError
from store.models import Job
from workers.inbox import Ack
from workers.inflight import InFlight
from workers.progress import ProgressReporter
from workers.retry import OUTAGE_RETRY_DELAYS_S, retry_unavailable

log = logging.getLogger(__name__)

#: Seconds between attempts while the store is unavailable.
RETRY_DELAYS_S = OUTAGE_RETRY_DELAYS_S


class Claim(NamedTuple):
    """The claim riding an ack call on a store that fetches next: the queue
    groups in the order to try, how many jobs (0: none) and their lease TTL, seconds."""

    queues: list[list[str]]
    want: int
    lease_ttl_s: float


class Recorder:
    """Records completions for one worker process (called from one thread at a
    time: the main thread, or at shutdown a slot's own thread)."""

    def __init__(
        self,
        store: JobStore,
        worker_id: str,
        inflight: InFlight | None = None,
        progress: ProgressReporter | None = None,
        queue: str = "default",
    ) -> None:
        self.store = store
        self.worker_id = worker_id
        #: The claim of no job an ack call carries when the caller asks none (a queue the worker serves).
        self._no_claim = Claim([[queue]], 0, 1.0)
        self.inflight = inflight
        self.progress = progress
        #: ``(job id, token)`` of completions the store never answered (an outage
        #: outlasted the retries): still InProgress under that token, as far as
        #: this process knows (the worker reports them at exit).
        self.unwritten: list[tuple[str, int]] = []

    def record(self, batch: Sequence[Ack], claim: Claim | None = None) -> list[Job]:
        """Record ``batch``; with ``claim`` (a store that ``fetches_next``) lease
        the next jobs in the same call and return them. The runs leave
        ``inflight`` once recorded (or refused). Never raises."""
        jobs: list[Job] = []
        try:
            jobs = self._record(batch, claim)
        except Exception:  # never lose the caller; the leases expire and recovery retries
            log.exception("worker %s: recording %d completions failed", self.worker_id, len(batch))
            self.unwritten.extend(run.key for run, _ in batch)
        finally:
            if self.inflight is not None:
                for run, _ in batch:
                    self.inflight.remove(run)
        return jobs

    def _record(self, batch: Sequence[Ack], claim: Claim | None) -> list[Job]:
        acks = [(run.job.id, run.job.lease_token, result) for run, result in batch]
        keys = [(job_id, token) for job_id, token, _ in acks]
        fetch = self.store.fetches_next
        reports = self.progress.take(keys) if fetch and self.progress is not None else []
        leased: list[Job] = []

        def record() -> list[Job | LeaseLost | None]:
            if fetch:  # acks, their last reports and the next claim in one call
                queues, want, ttl_s = claim or self._no_claim
                outcomes, jobs = self.store.complete_and_claim(
                    acks, self.worker_id, queues, want, ttl_s, progress=reports
                )
                leased[:] = jobs
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
            return []
        for (job_id, _, _), outcome in zip(acks, outcomes, strict=True):
            if isinstance(outcome, LeaseLost):
                log.info("worker %s: completion refused, %s", self.worker_id, outcome)
            else:
                log.debug("job %s completed", job_id, extra={"job_id": job_id, "worker_id": self.worker_id})
        return leased

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
