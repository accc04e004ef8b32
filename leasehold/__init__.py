"""Leasehold: a job queue in which every running job holds a lease.

The public API, for handler modules and application code::

    from leasehold import handler, open_store, wait, Leasehold

Names are loaded on first use (PEP 562 ``__getattr__``), so ``import
leasehold.settings`` from a store or a worker loads no web code, and this
package's top floor (it names the worker and web floors) never runs when a
lower floor imports ``leasehold.urls`` or ``leasehold.settings``.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from leasehold.hooks import (
        job_enqueued,
        job_failed,
        job_retry_scheduled,
        job_started,
        job_succeeded,
        use_middleware,
    )
    from leasehold.settings import open_store
    from store import JobStore
    from store.flow_rules import QueueLimits, Rate
    from store.lifecycle import JobStatus
    from store.models import Job
    from store.transactions import host_tables_only
    from webapp import create_app
    from webapp.extension import Leasehold
    from workers import Handler, JobContext, PermanentError, Retry, Snooze, handler, periodic, use_store, wait
    from workers.catalogue import enqueue
    from workers.sessions import Pending
    from workers.workflows import batch, chain

#: Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "handler": "workers",
    "periodic": "workers",
    "Handler": "workers",
    "JobContext": "workers",
    "PermanentError": "workers",
    "use_store": "workers",
    "wait": "workers",
    "open_store": "leasehold.settings",
    "JobStore": "store",
    "Job": "store.models",
    "JobStatus": "store.lifecycle",
    "Leasehold": "webapp.extension",
    "create_app": "webapp",
    "Retry": "workers",
    "Snooze": "workers",
    "enqueue": "workers.catalogue",
    "job_enqueued": "leasehold.hooks",
    "job_started": "leasehold.hooks",
    "job_succeeded": "leasehold.hooks",
    "job_failed": "leasehold.hooks",
    "job_retry_scheduled": "leasehold.hooks",
    "use_middleware": "leasehold.hooks",
    "batch": "workers.workflows",
    "chain": "workers.workflows",
    "Pending": "workers.sessions",
    "host_tables_only": "store.transactions",
    "QueueLimits": "store.flow_rules",
    "Rate": "store.flow_rules",
}

__all__ = [
    "Handler",
    "Job",
    "JobContext",
    "JobStatus",
    "JobStore",
    "Leasehold",
    "Pending",
    "PermanentError",
    "QueueLimits",
    "Rate",
    "Retry",
    "Snooze",
    "__version__",
    "batch",
    "chain",
    "create_app",
    "enqueue",
    "handler",
    "host_tables_only",
    "job_enqueued",
    "job_failed",
    "job_retry_scheduled",
    "job_started",
    "job_succeeded",
    "open_store",
    "periodic",
    "use_middleware",
    "use_store",
    "wait",
]


@cache
def installed_version() -> str:
    """The installed distribution's version ("0.1.0"), or "0+checkout" for a
    checkout that was never installed. Read on first use
    (``leasehold --version``, ``leasehold.__version__``), not at import."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("leasehold")
    except PackageNotFoundError:
        return "0+checkout"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        return installed_version()
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'leasehold' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
