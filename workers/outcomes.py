"""What a worker writes about its runs: acks (posted to the main thread's
inbox, recorded there in batches by ``workers.recorder``), nacks, execution
timeouts and releases, each carrying the run's lease token.

Who may write a run's outcome is decided by ``Running.move`` (one winner per
run, ``workers.inflight``). A handler that returns after the worker gave up
on its run (a timeout, a lost or released lease) has a late result: it is
recorded only where fencing makes that harmless. After a timeout that means
only when the worker's JobTimeout write was answered by the store (recorded,
or refused because the token is no longer current): the late ack then comes
after it and is refused. When the JobTimeout write gave up on an outage the
job is still InProgress under the same token, so the late result is dropped;
the lease, no longer renewed, expires and recovery retries the job.

A run's pending progress report (``workers.progress``) is written before its
nack or release (the recorder does it for acks), and discarded when the run's
outcome is not the worker's to record.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from leasehold import hooks
from leasehold.logs import job_fields
from store.base import JobStore
from store.errors import JobNotFound, LeaseLost, StoreUnavailable
from store.lifecycle import UNKNOWN_HANDLER_ERROR_TYPE, JobStatus
from store.models import Job
from workers.execute import Outcome, timed_out
from workers.handlers import get_handler
from workers.inbox import Inbox
from workers.inflight import InFlight, Running, State
from workers.progress import ProgressReporter
from workers.recorder import Recorder
from workers.retry import OUTAGE_RETRY_DELAYS_S, retry_unavailable

log = logging.getLogger(__name__)

#: Seconds between attempts to write an outcome while the store is unavailable.
WRITE_RETRY_DELAYS_S = OUTAGE_RETRY_DELAYS_S
#: Longest a timed-out run's late result waits for the worker's JobTimeout
#: write, seconds (the write's retries take about 2.6 s); past it the result is dropped.
SETTLE_WAIT_S = 30.0


class Outcomes:
    """Records the outcomes of one worker's runs in ``store`` as ``worker_id``."""

    def __init__(
        self,
        store: JobStore,
        worker_id: str,
        inflight: InFlight,
        inbox: Inbox,
        recorder: Recorder,
        progress: ProgressReporter | None = None,
        *,
        log_success: bool = True,
    ) -> None:
        self.log_success = log_success
        self.store = store
        self.worker_id = worker_id
        self.inflight = inflight
        self.inbox = inbox
        self.recorder = recorder
        self.progress = progress
        #: ``(job id, token)`` of nacks and releases the store never answered:
        #: still InProgress under that token as far as this process knows.
        self.unwritten: list[tuple[str, int]] = []

    def _flush_progress(self, run: Running) -> None:
        """Write ``run``'s pending progress report, if any (raises StoreUnavailable)."""
        if self.progress is not None:
            self.progress.flush([(run.job.id, run.job.lease_token)])

    def done(self, run: Running, outcome: Outcome) -> None:
        """A run ended (called from its slot's thread, which frees the slot
        when this returns). A completion is posted to the main thread's
        inbox (the run stays in ``inflight``, its lease renewed, until it is
        recorded), or recorded here once the inbox is closed (shutdown); a
        failure is recorded here. Never raises."""
        kept = False
        try:
            if outcome.dropped or not self._ours(run):
                if self.progress is not None:
                    self.progress.discard((run.job.id, run.job.lease_token))
                return
            if outcome.error is None:
                run_time_s = max(0.0, time.monotonic() - run.started_at)
                if self.log_success:
                    self._log_success(run, run_time_s)
                job = run.job
                hooks.send(
                    hooks.job_succeeded, job.name, job=job, result=outcome.result, run_time_s=run_time_s
                )
                kept = True
                if not self.inbox.ack(run, outcome.result):
                    self.recorder.record([(run, outcome.result)])
            else:
                self.fail(run, outcome)
        except Exception:  # a slot must always be freed
            log.exception(
                "worker %s: recording the outcome of job %s failed",
                self.worker_id,
                run.job.id,
                extra=job_fields(run.job, self.worker_id),
            )
        finally:
            if not kept:
                self.inflight.remove(run)

    def _log_success(self, run: Running, run_time_s: float) -> None:
        job = run.job
        log.info(
            "job %s (%s) succeeded in %.3fs",
            job.id,
            job.name,
            run_time_s,
            extra={**self._fields(run), "run_time_s": round(run_time_s, 6)},
        )

    def _fields(self, run: Running, error: dict[str, Any] | None = None) -> dict[str, Any]:
        """``extra=`` of an outcome's record: the job's fields, ``handler`` and
        ``attempt`` (1 for the first run), and the error's type, message and
        traceback for a failure."""
        fields: dict[str, Any] = {
            **job_fields(run.job, self.worker_id),
            "handler": run.job.name,
            "attempt": run.job.retry_count + 1,
        }
        if error is not None:
            fields["error_type"] = error.get("type")
            fields["error_message"] = error.get("message")
            fields["traceback"] = error.get("traceback")
        return fields

    def _log_failure(self, run: Running, error: dict[str, Any], job: Job, asked: bool) -> None:
        """WARNING for an attempt that will be retried, ERROR for a final
        failure; INFO for a handler's own Retry or Snooze (``asked``) that
        leaves the job Scheduled."""
        fields = self._fields(run, error)
        what = f"{error.get('type')}: {error.get('message')}"
        if job.status is JobStatus.Scheduled and asked:
            due = "" if job.retry_delay_until is None else f", due {job.retry_delay_until.isoformat()}"
            level = logging.WARNING if error.get("type") == UNKNOWN_HANDLER_ERROR_TYPE else logging.INFO
            log.log(level, "job %s (%s) %s%s", job.id, job.name, error.get("message"), due, extra=fields)
        elif job.status is JobStatus.Scheduled:
            due = "" if job.retry_delay_until is None else f", due {job.retry_delay_until.isoformat()}"
            log.warning(
                "job %s (%s) attempt %d failed: %s; retry %d of %d%s",
                job.id,
                job.name,
                fields["attempt"],
                what,
                job.retry_count,
                job.max_retries,
                due,
                extra=fields,
            )
        else:
            log.error(
                "job %s (%s) failed for good at attempt %d: %s",
                job.id,
                job.name,
                fields["attempt"],
                what,
                extra=fields,
            )

    def _ours(self, run: Running) -> bool:
        """Whether the handler's outcome may go to the store: the run was still
        RUNNING (now DONE), or it timed out and the worker's JobTimeout write
        was answered first (so fencing refuses this late one)."""
        if run.move(State.DONE):
            return True
        if run.state is State.TIMED_OUT:
            run.settled.wait(SETTLE_WAIT_S)
            if run.outcome_written:
                return True
            log.warning(
                "worker %s: job %s returned after its timeout, which the store never recorded; "
                "result discarded (its lease will expire)",
                self.worker_id,
                run.job.id,
                extra=job_fields(run.job, self.worker_id),
            )
            return False
        # Its lease was given back, or a renewal was refused (lost, canceled or
        # already expired): the run is no longer ours to record, even where the
        # store would still take the token.
        log.debug(
            "job %s finished after its lease was %s; result discarded",
            run.job.id,
            run.state.value,
            extra=job_fields(run.job, self.worker_id),
        )
        return False

    def fail(self, run: Running, outcome: Outcome) -> bool:
        """Nack (``store.fail``, with the backoff of the job's handler) with
        the run's token, retried while the store is unavailable (safe: the
        write is fenced by the token). True when the store answered: the
        failure was recorded, or refused (LeaseLost, the job is gone); False
        when every try met an outage."""
        job, error = run.job, outcome.error or {}
        fields = job_fields(job, self.worker_id)
        spec = get_handler(job.name)  # its own backoff decides (a timeout's too)
        policy = None if spec is None else spec.retry_policy(self.store.settings.retry)

        def nack() -> Job:
            self._flush_progress(run)
            return self.store.fail(
                job.id,
                job.lease_token,
                error,
                permanent=outcome.permanent,
                worker_id=self.worker_id,
                again=outcome.again,
                policy=policy,
            )

        try:
            after = retry_unavailable(
                nack, WRITE_RETRY_DELAYS_S, f"worker {self.worker_id}: failing job {job.id}"
            )
            self._log_failure(run, error, after, outcome.again is not None)
            signal = hooks.job_retry_scheduled if after.status is JobStatus.Scheduled else hooks.job_failed
            hooks.send(signal, after.name, job=after, error=error)
        except LeaseLost as exc:
            log.info("worker %s: failure refused, %s", self.worker_id, exc, extra=fields)
        except JobNotFound:
            log.info("worker %s: job %s no longer exists", self.worker_id, job.id, extra=fields)
        except StoreUnavailable as exc:
            log.error(
                "worker %s: could not record job %s (%s); its lease will expire",
                self.worker_id,
                job.id,
                exc,
                extra=fields,
            )
            self.unwritten.append(run.key)
            return False
        return True

    def time_out(self, run: Running) -> None:
        """Fail a run that moved to TIMED_OUT with JobTimeout (retried by the
        policy), note on it whether the store answered, then settle it."""
        try:
            run.outcome_written = self.fail(run, timed_out(run.job.timeout_seconds))
        finally:
            run.settled.set()

    def release(self, run: Running) -> None:
        """Give a RELEASED run's lease back (the job is due again at once, not
        a failure), then settle it. Never raises: a lease it could not give
        back expires and recovery retries the job."""
        fields = job_fields(run.job, self.worker_id)
        try:
            self._flush_progress(run)
            self.store.release(run.job.id, run.job.lease_token, worker_id=self.worker_id)
            log.debug("job %s released", run.job.id, extra=fields)
        except LeaseLost as exc:
            log.info("worker %s: release refused, %s", self.worker_id, exc, extra=fields)
        except Exception as exc:
            log.warning(
                "worker %s: releasing job %s failed: %s", self.worker_id, run.job.id, exc, extra=fields
            )
            self.unwritten.append(run.key)
        finally:
            run.settled.set()
