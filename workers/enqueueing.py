"""Enqueueing from application code: handler objects, the process's store, ``wait``.

``@handler`` returns a ``Handler``: it still calls like the function, and it
enqueues jobs for itself with the handler's declared queue, max_retries and
timeout as defaults::

    from workers import handler, wait

    @handler("index-source", queue="indexing", max_retries=3, timeout=60)
    def index_source(ctx): ...

    job = index_source.enqueue({"path": "a.py"}, priority=5)
    done = wait(job.id, timeout_s=30)         # Completed, Failed or Canceled

The store is the one passed in (``store=``), else the one set with
``use_store``, else the one the environment names (``LEASEHOLD_STORE_URL``
and the other ``LEASEHOLD_*`` defaults, read by ``settings_from_env``),
opened once per process on first use.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from leasehold import hooks
from store.base import JobStore
from store.lifecycle import TERMINAL
from store.models import Job, JobSpec, validate_spec
from workers.claim import IdleBackoff
from workers.sessions import Pending, in_session

if TYPE_CHECKING:
    from workers.handlers import HandlerSpec

__all__ = ["Handler", "Pending", "default_store", "enqueue_spec", "use_store", "wait"]

#: First and longest pause, seconds, between two reads of a job ``wait`` polls.
WAIT_FIRST_POLL_S = 0.005
WAIT_MAX_POLL_S = 0.25

_store: JobStore | None = None
#: Eager mode (workers.testing): runs an enqueued job at once and returns it finished.
_eager: Callable[[Job], Job] | None = None
_opened: JobStore | None = None  # opened here from the environment (closed by use_store)
_lock = threading.Lock()


def set_eager(run: Callable[[Job], Job] | None) -> None:
    """Eager mode on (``run(job)`` runs a new job and returns it finished) or
    off (None). For tests: the ``leasehold_eager`` fixture of workers.testing."""
    global _eager
    _eager = run


def use_store(store: JobStore | None) -> None:
    """Make ``store`` the one ``Handler.enqueue``, ``enqueue_many`` and ``wait``
    use in this process when no ``store=`` is given; None goes back to the
    store the environment names (opened again on next use)."""
    global _store, _opened
    with _lock:
        if _opened is not None and _opened is not store:
            _opened.close()
            _opened = None
        _store = store


def default_store() -> JobStore:
    """The store set with ``use_store``; else, inside a Flask app that mounts
    Leasehold (an app context is active), that app's store
    (``current_app.extensions["leasehold"]``, on the host's engine with
    ``Leasehold(app, db=db)``); else the one ``LEASEHOLD_STORE_URL`` names
    with the ``LEASEHOLD_*`` defaults, opened once per process on first use.
    Raises ConfigError naming a bad variable."""
    global _store, _opened
    if _store is None and (mounted := _app_store()) is not None:
        return mounted
    with _lock:
        if _store is None:
            from leasehold.settings import settings_from_env
            from store import open_store

            settings = settings_from_env()
            _store = _opened = open_store(settings.store_url, settings.store_settings())
        return _store


def _app_store() -> JobStore | None:
    """The store of the Flask app whose context is active, if it mounts
    Leasehold. Flask is looked up, never imported: a worker loads no web code."""
    flask = sys.modules.get("flask")
    if flask is None or not flask.has_app_context():
        return None
    found = flask.current_app.extensions.get("leasehold")
    return found if isinstance(found, JobStore) else None


class Handler:
    """A registered handler: calls like its function (``fn(ctx)``) and
    enqueues jobs for itself. ``spec`` is its registry entry (HandlerSpec)."""

    def __init__(self, spec: HandlerSpec) -> None:
        self.spec = spec
        functools.update_wrapper(self, spec.fn)  # __name__, __doc__, __module__, __wrapped__

    def __call__(self, ctx: Any) -> Any:
        return self.spec.fn(ctx)

    def __repr__(self) -> str:
        return f"<Handler {self.spec.name!r} {self.spec.fn.__module__}.{self.spec.fn.__qualname__}>"

    @property
    def name(self) -> str:
        return self.spec.name

    def enqueue(
        self, payload: Any = None, *, store: JobStore | None = None, session: Any = None, **options: Any
    ) -> Job | Pending[Job]:
        """Enqueue one job for this handler. ``options`` are JobSpec fields
        (queue, priority, max_retries, timeout_s, lease_ttl_s, delay_s or
        run_at, expires_at or expires_in_s, idempotency_key, unique_key,
        unique_for; times: aware datetimes or epoch seconds); omitted ones take the
        handler's declared defaults, then the store's. Returns the job (with
        an idempotency or unique key already held: the job holding it).
        ``session``: a SQLAlchemy session (Flask-SQLAlchemy's ``db.session``)
        whose transaction the job belongs to (workers/sessions.py): on a SQL
        store written in it, on Redis enqueued after it commits (a
        ``Pending`` is returned). Raises ValidationError, TypeError for an
        unknown option."""
        spec = self.spec.job_spec(payload, **options)
        return enqueue_spec(store or default_store(), spec, session)

    def enqueue_many(
        self, items: Iterable[Any], *, store: JobStore | None = None, session: Any = None, **options: Any
    ) -> list[Job] | Pending[list[Job]]:
        """Enqueue one job per item, one round trip per chunk (``JobStore.enqueue_many``).
        An item is a payload (given ``options`` as above), or a JobSpec taken
        as it is (it must name this handler). Returns the jobs in order.
        ``session`` as for ``enqueue``. Raises ValidationError (nothing
        written) or ValueError."""
        specs = []
        for item in items:
            if isinstance(item, JobSpec):
                if item.name != self.spec.name:
                    raise ValueError(f"a JobSpec for {item.name!r} given to handler {self.spec.name!r}")
                specs.append(item)
            else:
                specs.append(self.spec.job_spec(item, **options))
        target = store or default_store()

        def write() -> tuple[list[Job], list[Job]]:
            jobs = target.enqueue_many(specs)
            return jobs, jobs

        if session is not None:
            return in_session(target, session, write, lambda: [validate_spec(s) for s in specs])
        jobs = write()[0]
        hooks.announce_enqueued(jobs)
        return jobs


def enqueue_spec(target: JobStore, spec: JobSpec, session: Any = None) -> Job | Pending[Job]:
    """Enqueue ``spec`` on ``target`` (in ``session``'s transaction when
    given, see workers/sessions.py); ``job_enqueued`` is sent for a job it
    created (after the session's commit). In eager mode the job is run at
    once and returned finished; with a session, it is run after the commit
    (never after a rollback) and the unfinished job is returned."""

    def write() -> tuple[Job, list[Job]]:
        job, created = target.enqueue_idempotent(spec)
        return job, [job] if created else []

    if session is not None:  # eager mode: the job runs once the session has committed
        return in_session(target, session, write, lambda: validate_spec(spec), _eager)
    job, created = write()
    hooks.announce_enqueued(created)
    if _eager is not None:
        return _eager(job)
    return job


def wait(job_id: str | Job, timeout_s: float, store: JobStore | None = None) -> Job:
    """Block until the job is Completed, Failed or Canceled; return it.

    Polls ``store.get`` with a backoff from 5 ms doubling to 250 ms (so a
    wait costs at most ~4 reads a second once settled, and answers within
    ~250 ms of the outcome). The stores' wake-up channels (Redis wake-up
    lists, PostgreSQL LISTEN) announce enqueued jobs only, not finished ones, so
    they cannot end a wait sooner. A Failed job may still be requeued by an
    operator; ``wait`` returns at the first terminal status it sees.
    Raises TimeoutError after ``timeout_s`` seconds, JobNotFound for an
    unknown (or purged) job."""
    key = job_id.id if isinstance(job_id, Job) else job_id
    target = store or default_store()
    deadline = time.monotonic() + timeout_s
    backoff = IdleBackoff(WAIT_FIRST_POLL_S, WAIT_MAX_POLL_S)
    while True:
        job = target.get(key)
        if job.status in TERMINAL:
            return job
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"job {key} is still {job.status.name} after {timeout_s:g}s")
        time.sleep(min(backoff.next(), left))
