"""Run one handler and turn what happened into an Outcome (no store I/O but
a pool process's progress reports, see ``run_in_child``).

The same function runs in a pool thread and, through ``run_in_child``, in a
pool process, so both pools report results and errors identically. Errors
are the store's ``{type, message, traceback}``; ``permanent`` skips retries.
"""

from __future__ import annotations

import inspect
import logging
import sys
import traceback
from dataclasses import dataclass
from typing import Any

import orjson

from leasehold.hooks import around
from store.errors import StoreUnavailable
from store.lifecycle import UNKNOWN_HANDLER_ERROR_TYPE, RetryPolicy, RunAgain
from store.models import Job
from workers.aio import LOOP, HandlerCancelled
from workers.handlers import HandlerSpec, JobContext, PermanentError, Retry, Snooze, get_handler
from workers.progress import child_reporter

log = logging.getLogger(__name__)

#: Longest error message and traceback kept on a job, characters.
MAX_MESSAGE_CHARS = 2_000
MAX_TRACEBACK_CHARS = 20_000


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a run produced: a JSON result, or an error for ``store.fail``.

    ``dropped`` means there is nothing to record: the run was stopped because
    its lease was lost or given back (process pool: the process was killed)."""

    result: Any = None
    error: dict[str, Any] | None = None
    permanent: bool = False
    dropped: bool = False
    again: RunAgain | None = None  # the handler raised Retry or Snooze

    @property
    def ok(self) -> bool:
        return self.error is None and not self.dropped


def error(kind: str, message: str, tb: str | None = None) -> dict[str, Any]:
    """A job error as the store keeps it, truncated to sane sizes."""
    if tb is not None and len(tb) > MAX_TRACEBACK_CHARS:
        tb = "…" + tb[-MAX_TRACEBACK_CHARS:]
    return {"type": kind, "message": message[:MAX_MESSAGE_CHARS], "traceback": tb}


def failure(kind: str, message: str, *, permanent: bool = False) -> Outcome:
    """An Outcome for a failure the worker itself detected (no traceback)."""
    return Outcome(error=error(kind, message), permanent=permanent)


def unknown_handler(name: str, worker_id: str) -> Outcome:
    """The permanent failure of a job no handler is registered for."""
    return failure(
        UNKNOWN_HANDLER_ERROR_TYPE,
        f"no handler named {name!r} is registered on worker {worker_id} "
        "(is its module listed in LEASEHOLD_HANDLERS?)",
        permanent=True,
    )


#: Longest wait, seconds, before a job given back for want of its handler is due again.
UNKNOWN_HANDLER_MAX_DELAY_S = 60.0


def handler_missing(job: Job, worker_id: str, grace_s: float, policy: RetryPolicy) -> Outcome:
    """The outcome of a claimed job whose handler this worker lacks (a rolling
    deploy: another worker may have it). While the job is younger than
    ``grace_s`` seconds (its claim time minus its enqueue time, both the
    store's clock) it is given back without spending a retry, due again
    after the backoff of its claim count (at most UNKNOWN_HANDLER_MAX_DELAY_S
    and never past the grace); after that it fails for good."""
    age = (job.started_at - job.created_at).total_seconds() if job.started_at and job.created_at else 0.0
    left = grace_s - age
    if left <= 0:
        return unknown_handler(job.name, worker_id)
    delay = min(policy.delay_s(max(1, job.lease_token)), UNKNOWN_HANDLER_MAX_DELAY_S, left)
    message = (
        f"worker {worker_id} has no handler named {job.name!r}; given back for a worker that has it "
        f"(failed once the job is {grace_s:g}s old)"
    )
    again = RunAgain(delay, snooze=True, max_snoozes=sys.maxsize)
    return Outcome(error=error(UNKNOWN_HANDLER_ERROR_TYPE, message), again=again)


def timed_out(timeout_s: float) -> Outcome:
    """The failure of a run stopped after its execution timeout (retried)."""
    return failure("JobTimeout", f"job ran longer than its {timeout_s:g}s timeout and was stopped")


def run_handler(spec: HandlerSpec, ctx: JobContext) -> Outcome:
    """Call the handler; never raises (except BaseExceptions like SystemExit).

    An ``async def`` handler (any handler returning an awaitable) is awaited
    on the process's event loop (``workers.aio.LOOP``) while this slot waits;
    a run whose ``ctx.cancelled`` is set has its task cancelled and nothing
    to record (``dropped``: the worker already gave the run up).
    A result that does not serialise as JSON is a permanent ``ResultNotJSON``
    failure; ``PermanentError`` fails without retry; any other exception is a
    failure carrying its traceback, retryable unless the handler's
    ``retry_on`` / ``give_up_on`` say it fails for good
    (``HandlerSpec.gives_up``). ``Retry`` and ``Snooze`` become a failure
    with ``again`` (error type Retry, Snooze) for ``store.fail``."""
    try:
        with around(ctx):
            result = spec.fn(ctx)
            if inspect.isawaitable(result):
                result = LOOP.run(result, ctx.cancelled)
    except HandlerCancelled:
        return Outcome(dropped=True)
    except Retry as exc:
        again = RunAgain(exc.after)
        return Outcome(error=error(again.error_type, str(exc), traceback.format_exc()), again=again)
    except Snooze as exc:
        again = RunAgain(exc.after, snooze=True, max_snoozes=spec.max_snoozes)
        return Outcome(error=error(again.error_type, str(exc)), again=again)
    except PermanentError as exc:
        return Outcome(error=error(type(exc).__name__, str(exc), traceback.format_exc()), permanent=True)
    except (Exception, SystemExit) as exc:  # sys.exit() in a handler fails the job, not the worker
        # The handler's retry_on / give_up_on classify it (HandlerSpec.gives_up).
        kind = type(exc).__name__
        return Outcome(error=error(kind, str(exc), traceback.format_exc()), permanent=spec.gives_up(exc))
    try:
        orjson.dumps(result)
    except TypeError as exc:
        message = f"handler {spec.name!r} returned a {type(result).__name__}, not JSON ({exc})"
        return failure("ResultNotJSON", message, permanent=True)
    return Outcome(result=result)


def run_in_child(name: str, fields: dict[str, Any]) -> Outcome:
    """Pool-process entry: look the handler up in this process's registry
    (filled by the pool's initializer) and run it; then write the run's
    pending progress report, so it is stored before the worker acks."""
    spec = get_handler(name)
    if spec is None:
        return unknown_handler(name, fields.get("worker_id", "?"))
    reporter = child_reporter()
    outcome = run_handler(spec, JobContext(**fields, _reporter=reporter))
    if reporter is not None:
        try:
            reporter.flush([(fields["job_id"], fields["lease_token"])])
        except StoreUnavailable as exc:  # a report is a hint: the outcome goes on
            log.warning("progress of job %s not recorded: %s", fields["job_id"], exc)
    return outcome
