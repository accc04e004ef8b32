"""The handler API: ``JobContext``, the errors a handler raises (``PermanentError``,
``Retry``, ``Snooze``), ``HandlerSpec`` and the process-wide registry that
``@handler`` (workers/declare.py) fills.

A handler is a function of one argument, the job's ``JobContext``, whose
return value (JSON) becomes the job's result. Handlers are registered by
importing their modules: ``load_handlers(["app.jobs", ...])`` imports the
modules LEASEHOLD_HANDLERS names, and each ``@handler`` in them adds itself
to the process-wide registry that workers look names up in.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from store.lifecycle import DEFAULT_MAX_SNOOZES, RetryPolicy
from store.models import Job, JobSpec, progress_value
from store.spec import MAX_DELAY_S
from workers.job_log_book import run_logger

__all__ = [
    "HandlerError",
    "HandlerSpec",
    "JobContext",
    "PermanentError",
    "Retry",
    "Snooze",
    "get_handler",
    "load_handlers",
    "register",
    "registry",
    "served_queues",
    "unserved_handlers",
]


class PermanentError(Exception):
    """Raise from a handler to fail the job at once, without using a retry."""


def _after(after: float) -> float:
    after = float(after)
    if not 0 <= after <= MAX_DELAY_S:
        raise ValueError(f"after must be within [0, {MAX_DELAY_S:g}] seconds, got {after!r}")
    return after


class Retry(Exception):
    """Raise from a handler to run the job again ``after`` seconds from now
    instead of after the backoff. Spends a retry like any failure (the job
    ends Failed once its ``max_retries`` are spent). Raises ValueError for a
    negative or too long ``after``."""

    def __init__(self, after: float, message: str = "") -> None:
        self.after = _after(after)
        super().__init__(message or f"retry requested in {self.after:g}s")


class Snooze(Exception):
    """Raise from a handler to put the job back, due ``after`` seconds from
    now, without spending a retry (Oban's snooze): for "not yet" (a rate
    limit, a resource not ready). The handler's ``max_snoozes`` (default
    100) caps it: the snooze after the last one fails the job (error type
    ``Snooze``). Raises ValueError for a negative or too long ``after``."""

    def __init__(self, after: float) -> None:
        self.after = _after(after)
        super().__init__(f"snoozed for {self.after:g}s")


#: Guards the lazy creation of JobContext.cancelled (read by a handler, set by the worker).
_EVENT_LOCK = threading.Lock()


class CancelEvent(threading.Event):
    """``ctx.cancelled``: a threading.Event that also calls back whoever
    asked (``add_callback``) when set, so the run of an async handler can be
    cancelled at once rather than polled."""

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: list[Callable[[], Any]] = []
        self._callbacks_lock = threading.Lock()

    def set(self) -> None:
        with self._callbacks_lock:
            callbacks, self._callbacks = self._callbacks, []
            super().set()
        for callback in callbacks:
            callback()

    def add_callback(self, callback: Callable[[], Any]) -> None:
        """Call ``callback()`` when set (at once when already set)."""
        with self._callbacks_lock:
            if not self.is_set():
                self._callbacks.append(callback)
                return
        callback()


class HandlerError(Exception):
    """A handler module cannot be imported, or two handlers claim one name."""


@dataclass(slots=True)
class JobContext:
    """What a handler gets: the job's input and its lease.

    ``attempt`` is the job's retry_count (0 on the first run). ``lease_token``
    is the fencing token of this run; ``f"{job_id}:{lease_token}"`` is an
    idempotency key for side effects. ``cancelled`` is set when the job is
    canceled, times out or loses its lease: long handlers should check it and
    return early (with the process pool a timed-out job's process is killed).
    """

    job_id: str
    name: str
    payload: Any
    headers: dict[str, str] | None
    route_params: dict[str, Any] | None
    query_params: dict[str, Any] | None
    attempt: int
    worker_id: str
    lease_token: int
    #: Results of the jobs this one waited for (``depends_on``), read by the
    #: worker before the run: ``{job_id: {"status": name, "result": value}}``.
    parents: dict[str, dict[str, Any]] | None = None
    _cancelled: CancelEvent | None = field(default=None, repr=False, compare=False)
    _reporter: Any = field(default=None, repr=False, compare=False)
    _log: Any = field(default=None, repr=False, compare=False)

    @property
    def cancelled(self) -> CancelEvent:
        """Set when the job is canceled, times out or loses its lease (a
        threading.Event; an async handler's task is cancelled then too).
        Made on first use (most runs never look at it; an Event costs a few µs)."""
        event = self._cancelled
        if event is None:
            with _EVENT_LOCK:
                if self._cancelled is None:
                    self._cancelled = CancelEvent()
                event = self._cancelled
        return event

    def parent_results(self) -> dict[str, dict[str, Any]]:
        """The parents' outcomes, ``{job_id: {"status": "Completed" | "Failed"
        | "Canceled", "result": value}}`` (empty for a job without parents; a
        batch's callback gets every job of the batch)."""
        return dict(self.parents or {})

    def progress(self, fraction: float, message: str | None = None) -> None:
        """Report how far the job got: ``fraction`` in [0, 1] and an optional
        short ``message`` (at most 500 characters), shown live in the
        console and in the job JSON. Only kept in memory: the worker writes
        the latest report of the run about every half second
        (workers.progress) and before the job's outcome, fenced by this
        run's lease token (a run that lost its lease writes nothing). Raises
        ValidationError for a bad fraction or message at once; never for the
        store (a report is a hint). Outside a worker (a context built by
        hand) it only checks its input."""
        progress_value(fraction, message)
        if self._reporter is not None:
            self._reporter.report(self.job_id, self.lease_token, self.worker_id, fraction, message)

    @property
    def log(self) -> logging.Logger:
        """This run's ``logging.Logger`` (``ctx.log.info("sent %d", n)``):
        records of INFO and up are kept with the job's attempt (at most
        LEASEHOLD_JOB_LOG_LINES lines an attempt, the newest; a line cut to
        4000 characters) and shown by the job page, ``GET
        /api/jobs/<id>/logs`` and ``leasehold job logs``; they reach the
        worker's own log too. Made on first use; written by the worker in
        batches, never one store call a line (workers/job_log_book.py)."""
        logger = self._log
        if logger is None:
            book = getattr(self._reporter, "logs", None)
            logger = self._log = run_logger(book, self.job_id, self.lease_token, self.attempt + 1, self.name)
        return logger

    @classmethod
    def for_job(cls, job: Job, worker_id: str, reporter: Any = None) -> JobContext:
        """The context of one claimed job."""
        return cls(
            job_id=job.id,
            name=job.name,
            payload=job.payload,
            headers=job.headers,
            route_params=job.route_params,
            query_params=job.query_params,
            attempt=job.retry_count,
            worker_id=worker_id,
            lease_token=job.lease_token,
            _reporter=reporter,
        )

    def fields(self) -> dict[str, Any]:
        """Everything but ``cancelled``, picklable, to rebuild the context in
        a pool process (``JobContext(**fields)``)."""
        return {
            "job_id": self.job_id,
            "name": self.name,
            "payload": self.payload,
            "headers": self.headers,
            "route_params": self.route_params,
            "query_params": self.query_params,
            "attempt": self.attempt,
            "worker_id": self.worker_id,
            "lease_token": self.lease_token,
            "parents": self.parents,
        }


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    """A registered handler and its enqueue defaults.

    ``queue``, ``max_retries`` and ``timeout_s`` are what ``job_spec`` (and the
    ``enqueue`` command) use when the caller does not say; None leaves the
    store's default (LEASEHOLD_MAX_RETRIES, LEASEHOLD_JOB_TIMEOUT). A worker
    enforces the timeout recorded on the job (``timeout_seconds``).
    ``max_snoozes``: how many times a job may ``raise Snooze`` before the next
    one fails it.

    Its retry policy: ``retry_base_s``, ``retry_max_delay_s`` (seconds) and
    ``retry_jitter`` (a fraction in [0, 1]) override the store's backoff
    (LEASEHOLD_RETRY_BASE, _MAX_DELAY, _JITTER) where not None
    (``retry_policy``); ``retry_on`` and ``give_up_on`` are exception types
    that decide whether a failure may retry at all (``gives_up``).
    """

    name: str
    fn: Callable[[JobContext], Any]
    queue: str = "default"
    max_retries: int | None = None
    timeout_s: float | None = None
    max_snoozes: int = DEFAULT_MAX_SNOOZES
    retry_base_s: float | None = None
    retry_max_delay_s: float | None = None
    retry_jitter: float | None = None
    retry_on: tuple[type[BaseException], ...] = ()
    give_up_on: tuple[type[BaseException], ...] = ()

    def retry_policy(self, default: RetryPolicy) -> RetryPolicy:
        """The backoff of this handler's retries: ``default`` (the store's)
        with the handler's own values where it set them."""
        return default.overridden(self.retry_base_s, self.retry_max_delay_s, self.retry_jitter)

    def gives_up(self, exc: BaseException) -> bool:
        """Whether ``exc``, raised by the handler, fails the job for good at
        once, retries left or not: it is a ``give_up_on`` type, or the handler
        names ``retry_on`` types and it is none of them (``give_up_on`` wins
        where both match)."""
        if isinstance(exc, self.give_up_on):
            return True
        return bool(self.retry_on) and not isinstance(exc, self.retry_on)

    def policy_json(self) -> dict[str, Any]:
        """The policy as a worker publishes it (workers/catalogue.py): the
        backoff values (None: the store's) and the exception types' names."""
        return {
            "retry_base_s": self.retry_base_s,
            "retry_max_delay_s": self.retry_max_delay_s,
            "retry_jitter": self.retry_jitter,
            "retry_on": [exception_name(t) for t in self.retry_on],
            "give_up_on": [exception_name(t) for t in self.give_up_on],
        }

    def job_spec(self, payload: Any = None, **overrides: Any) -> JobSpec:
        """A JobSpec for this handler; ``overrides`` are JobSpec fields."""
        options: dict[str, Any] = {
            "queue": self.queue,
            "max_retries": self.max_retries,
            "timeout_s": self.timeout_s,
        }
        options.update({k: v for k, v in overrides.items() if v is not None})
        return JobSpec(self.name, payload, **options)


def exception_name(kind: type[BaseException]) -> str:
    """An exception type as the catalogue shows it: ``KeyError`` for a
    builtin, else ``module.QualName``."""
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


_registry: dict[str, HandlerSpec] = {}
_lock = threading.Lock()


def _same_function(a: Callable[..., Any], b: Callable[..., Any]) -> bool:
    """True for one function defined twice (a module imported again)."""
    key = ("__module__", "__qualname__")
    return all(getattr(a, k, None) == getattr(b, k, None) for k in key)


def register(spec: HandlerSpec) -> None:
    """Add ``spec`` to the process-wide registry (``@handler`` in
    workers/declare.py calls it). Registering the same function again (a
    module imported twice) is a no-op. Raises HandlerError when another
    function already holds the name."""
    with _lock:
        old = _registry.get(spec.name)
        if old is not None and not _same_function(old.fn, spec.fn):
            where = f"{old.fn.__module__}.{old.fn.__qualname__}"
            raise HandlerError(f"handler {spec.name!r} is already registered by {where}")
        _registry[spec.name] = spec


def get_handler(name: str) -> HandlerSpec | None:
    """The handler registered for ``name``, or None."""
    return _registry.get(name)


def registry() -> Mapping[str, HandlerSpec]:
    """A read-only view of every registered handler, by name."""
    return MappingProxyType(_registry)


def served_queues() -> list[tuple[str, int]]:
    """The queues a worker serves when it is not told: ``default`` and every
    queue a registered handler names, each with weight 1, ``default`` first."""
    names = sorted({spec.queue for spec in _registry.values()} - {"default"})
    return [("default", 1), *((name, 1) for name in names)]


def unserved_handlers(queues: Iterable[str]) -> list[HandlerSpec]:
    """Registered handlers whose queue is not among ``queues``, by name."""
    served = set(queues)
    return [spec for name, spec in sorted(_registry.items()) if spec.queue not in served]


def unregister(name: str) -> None:
    """Forget a handler (tests)."""
    with _lock:
        _registry.pop(name, None)


def load_handlers(paths: Iterable[str] | str) -> list[str]:
    """Import handler modules; returns the names registered afterwards.

    ``paths`` is an iterable of dotted module paths or one comma-separated
    string (LEASEHOLD_HANDLERS). Raises HandlerError naming the module that
    failed to import, with the underlying error.
    """
    if isinstance(paths, str):
        paths = paths.split(",")
    for raw in paths:
        path = raw.strip()
        if not path:
            continue
        try:
            importlib.import_module(path)
        except HandlerError:
            raise
        except Exception as exc:  # an import can fail in any way; name the module
            raise HandlerError(f"cannot import handler module {path!r}: {type(exc).__name__}: {exc}") from exc
    return sorted(_registry)
