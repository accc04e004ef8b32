"""``@handler``: declare a function as the handler of a job name, with its
enqueue defaults and, with ``cron``, as a periodic job of the same name.

It sits above the registry (workers/handlers.py), the handler objects that
enqueue (workers/enqueueing.py) and the periodic declarations
(workers/periodic.py), which each need only the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from store.lifecycle import DEFAULT_MAX_SNOOZES, RetryPolicy
from workers.enqueueing import Handler
from workers.handlers import HandlerSpec, JobContext, register
from workers.periodic import periodic

#: What ``retry_on`` and ``give_up_on`` take: one exception type or several.
ExceptionTypes = type[BaseException] | Iterable[type[BaseException]]


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
    retry_base: float | None = None,
    retry_max_delay: float | None = None,
    retry_jitter: float | None = None,
    retry_on: ExceptionTypes = (),
    give_up_on: ExceptionTypes = (),
) -> Callable[[Callable[[JobContext], Any]], Handler]:
    """Register the decorated function as the handler of jobs named ``name``.

    ``queue``, ``max_retries`` and ``timeout`` (seconds) are enqueue defaults
    (see HandlerSpec). With ``cron`` the handler is also a periodic job of the
    same name (``workers.periodic.periodic``: ``timezone``, ``payload``,
    ``catch_up``). ``max_snoozes``: snoozes a job may take (see Snooze).

    Its retry policy (docs/handlers.md): ``retry_base`` and ``retry_max_delay``
    (seconds) and ``retry_jitter`` (a fraction in [0, 1]) replace the store's
    backoff, ``delay = min(retry_max_delay, retry_base * 2**retry_count)``,
    where given (Celery's ``retry_backoff``, huey's ``retry_delay``); with
    ``retry_on`` (exception types; Celery's ``autoretry_for``, dramatiq's
    ``retry_when``) only those retry and any other exception fails the job
    for good at once; ``give_up_on`` types fail it for good at once (they win
    over ``retry_on``). A timeout and an expired lease retry regardless.
    Returns a ``Handler``: it calls like the function and has
    ``.enqueue(payload, **options)`` and ``.enqueue_many(items)``, both
    taking ``session=`` to join an application's SQLAlchemy transaction (see
    workers.enqueueing, workers/sessions.py). Raises HandlerError
    when another function already holds ``name`` (ScheduleError for a bad
    schedule), ValueError for bad options.
    """
    retry_types = _exception_types("retry_on", retry_on)
    give_up_types = _exception_types("give_up_on", give_up_on)
    RetryPolicy().overridden(retry_base, retry_max_delay, retry_jitter)  # raises ValueError naming the value
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
            name,
            fn,
            queue,
            max_retries,
            None if timeout is None else float(timeout),
            max_snoozes,
            retry_base_s=None if retry_base is None else float(retry_base),
            retry_max_delay_s=None if retry_max_delay is None else float(retry_max_delay),
            retry_jitter=None if retry_jitter is None else float(retry_jitter),
            retry_on=retry_types,
            give_up_on=give_up_types,
        )
        register(spec)
        if cron is not None:
            periodic(name, name, cron, timezone=timezone, payload=payload, queue=queue, catch_up=catch_up)
        return Handler(spec)

    return declare


def _exception_types(option: str, given: ExceptionTypes) -> tuple[type[BaseException], ...]:
    """``given`` (an exception type or an iterable of them) as a tuple.
    Raises ValueError naming ``option`` for anything else."""
    if isinstance(given, type):
        out: tuple[Any, ...] = (given,)
    elif isinstance(given, tuple | list | set | frozenset):
        out = tuple(given)
    else:
        raise ValueError(f"{option} must be an exception type or a tuple of them, got {given!r}")
    for kind in out:
        if not (isinstance(kind, type) and issubclass(kind, BaseException)):
            raise ValueError(f"{option} must be exception types, got {kind!r}")
    return out
