"""``@handler``: declare a function as the handler of a job name, with its
enqueue defaults and, with ``cron``, as a periodic job of the same name.

It sits above the registry (workers/handlers.py), the handler objects that
enqueue (workers/enqueueing.py) and the periodic declarations
(workers/periodic.py), which each need only the registry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from store.lifecycle import DEFAULT_MAX_SNOOZES
from workers.enqueueing import Handler
from workers.handlers import HandlerSpec, JobContext, register
from workers.periodic import periodic


def handler(
    name: str,
    queue: str = "default",
    max_retries: int | None = None,
    timeout: float | None = None,
    *,
    cron: str | None = None,
    timezone: str = "UTC",
    payload: Any = None,
    catch_up: bool = True,
    max_snoozes: int = DEFAULT_MAX_SNOOZES,
) -> Callable[[Callable[[JobContext], Any]], Handler]:
    """Register the decorated function as the handler of jobs named ``name``.

    ``queue``, ``max_retries`` and ``timeout`` (seconds) are enqueue defaults
    (see HandlerSpec). With ``cron`` the handler is also a periodic job of the
    same name (``workers.periodic.periodic``: ``timezone``, ``payload``,
    ``catch_up``). ``max_snoozes``: snoozes a job may take (see Snooze).
    Returns a ``Handler``: it calls like the function and has
    ``.enqueue(payload, **options)`` and ``.enqueue_many(items)``, both
    taking ``session=`` to join an application's SQLAlchemy transaction (see
    workers.enqueueing, workers/sessions.py). Raises HandlerError
    when another function already holds ``name`` (ScheduleError for a bad
    schedule), ValueError for bad options.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError("handler name must be a non-empty string")
    if max_retries is not None and (isinstance(max_retries, bool) or max_retries < 0):
        raise ValueError("max_retries must be >= 0")
    if timeout is not None and not timeout > 0:
        raise ValueError("timeout must be > 0 seconds")
    if isinstance(max_snoozes, bool) or not isinstance(max_snoozes, int) or max_snoozes < 0:
        raise ValueError("max_snoozes must be an integer >= 0")

    def declare(fn: Callable[[JobContext], Any]) -> Handler:
        fn = fn.spec.fn if isinstance(fn, Handler) else fn
        spec = HandlerSpec(
            name, fn, queue, max_retries, None if timeout is None else float(timeout), max_snoozes
        )
        register(spec)
        if cron is not None:
            periodic(name, name, cron, timezone=timezone, payload=payload, queue=queue, catch_up=catch_up)
        return Handler(spec)

    return declare
