"""Leasehold workers: the handler API, worker processes and their CLI.

Handler modules import from here::

    from workers import handler, periodic, JobContext, PermanentError, Retry, Snooze

Hooks: the blinker signals ``job_enqueued``, ``job_started``,
``job_succeeded``, ``job_retry_scheduled``, ``job_failed`` and
``use_middleware`` (``leasehold.hooks``).

Application code enqueues through a handler (``my_handler.enqueue(payload)``)
and waits for an outcome with ``wait(job_id, timeout_s)``; ``use_store(store)``
picks the store both use (default: the one LEASEHOLD_STORE_URL names).
"""

from leasehold.hooks import (
    job_enqueued,
    job_failed,
    job_retry_scheduled,
    job_started,
    job_succeeded,
    use_middleware,
)
from workers.declare import handler
from workers.enqueueing import Handler, use_store, wait
from workers.handlers import JobContext, PermanentError, Retry, Snooze
from workers.periodic import periodic

__all__ = [
    "Handler",
    "JobContext",
    "PermanentError",
    "Retry",
    "Snooze",
    "handler",
    "job_enqueued",
    "job_failed",
    "job_retry_scheduled",
    "job_started",
    "job_succeeded",
    "periodic",
    "use_middleware",
    "use_store",
    "wait",
]
