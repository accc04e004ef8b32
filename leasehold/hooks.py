"""Hooks around jobs: lifecycle signals (blinker, Flask's own signal library)
and middleware around a handler's run, for Sentry, OpenTelemetry, metrics.

Signals, each sent with the handler name as sender (``connect(fn,
sender="send-invoice")`` listens to one handler) and keyword arguments:

* ``job_enqueued(name, job=Job)``: a job was enqueued through Leasehold's
  producers (a handler's ``enqueue``/``enqueue_many``,
  ``workers.catalogue.enqueue``, ``POST /api/jobs``, ``leasehold enqueue``),
  in the producing process; a raw ``store.enqueue`` sends nothing.
* ``job_started(name, job=Job, ctx=JobContext)``: a slot starts the run.
* ``job_succeeded(name, job=Job, result=..., run_time_s=float)``.
* ``job_retry_scheduled(name, job=Job, error=dict)``: a failed attempt
  (error, timeout, ``Retry``, ``Snooze``) left the job Scheduled.
* ``job_failed(name, job=Job, error=dict)``: the job ended Failed.

The run signals are sent in the worker process (for ``--pool process`` too),
from the thread that records the outcome; ``job`` is the job after the
store's write for failures, as claimed otherwise. A receiver that raises is
logged and ignored: a hook never changes a job's outcome.

Middleware (``use_middleware(factory)``): ``factory(ctx)`` returns a context
manager entered around the handler's run, in the thread (or pool process)
that runs it, outermost first in registration order; the handler's exception
passes through it (so Sentry sees it) before the worker classifies it.
Register middleware in a handler module so pool processes get it too.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from blinker import Namespace

log = logging.getLogger(__name__)

_signals = Namespace()
job_enqueued = _signals.signal("job-enqueued", doc="a job was enqueued (sender: its handler name)")
job_started = _signals.signal("job-started", doc="a slot starts a run (sender: handler name)")
job_succeeded = _signals.signal("job-succeeded", doc="a run returned its result (sender: handler name)")
job_failed = _signals.signal("job-failed", doc="a job ended Failed (sender: handler name)")
job_retry_scheduled = _signals.signal(
    "job-retry-scheduled", doc="a failed attempt left the job Scheduled (sender: handler name)"
)

#: W3C Trace Context headers carried from an enqueueing request to the job's run.
TRACE_HEADERS = ("traceparent", "tracestate")

Middleware = Callable[[Any], AbstractContextManager[Any]]
_middleware: list[Middleware] = []
_lock = threading.Lock()


def send(signal: Any, sender: str, **kwargs: Any) -> None:
    """Send ``signal``; a receiver's exception is logged, never raised."""
    if not signal.receivers:
        return
    try:
        signal.send(sender, **kwargs)
    except Exception:
        log.exception("a receiver of %s for %r failed", signal.name, sender)


def announce_enqueued(jobs: Any) -> None:
    """Send ``job_enqueued`` for each newly created job in ``jobs`` (an
    iterable of ``Job``); the one place every enqueue path announces from."""
    for job in jobs:
        send(job_enqueued, job.name, job=job)


def use_middleware(factory: Middleware) -> Middleware:
    """Register ``factory(ctx) -> context manager`` around every handler run
    in this process; returns it (usable as a decorator)."""
    with _lock:
        if factory not in _middleware:
            _middleware.append(factory)
    return factory


def remove_middleware(factory: Middleware) -> None:
    """Unregister a middleware (tests, reloads)."""
    with _lock:
        if factory in _middleware:
            _middleware.remove(factory)


@contextlib.contextmanager
def around(ctx: Any) -> Iterator[None]:
    """Every registered middleware entered around one run."""
    with _lock:
        factories = list(_middleware)
    if not factories:
        yield
        return
    with contextlib.ExitStack() as stack:
        for factory in factories:
            stack.enter_context(factory(ctx))
        yield
