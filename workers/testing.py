"""Testing your handlers: a pytest plugin (entry point ``pytest11``, loaded
by pytest wherever Leasehold is installed).

Fixtures:

* ``leasehold_store``: an isolated store, the real SQLite store on a private
  file in the test's temporary folder (migrated once per session, copied
  per test), made the process's default store (``workers.use_store``) for
  the test, so ``my_handler.enqueue(...)`` lands in it.
* ``leasehold_drain``: ``drain(advance=True, periodic=False, max_rounds=100) -> list[Job]``
  runs the due jobs in this process through the real lifecycle (an
  in-process worker in burst mode: claim with a lease, the handler in a
  slot, timeouts, ack/nack with the token, retry decisions, unique keys)
  until none is due. With ``advance`` the store's clock is moved to the next
  Scheduled job (a retry's backoff, a delay, a snooze) and draining goes on,
  so retries run without sleeping. Returns every job it touched, as they
  ended. Hooks (signals, middleware) run as in a worker. With ``periodic``
  the ticks of the declared periodic jobs due at the store's clock are
  enqueued first, exactly once each, as a worker's scheduler does (move
  the clock to reach one: ``leasehold_store.clock_offset_s += 86400``).
* ``leasehold_eager``: eager mode: ``my_handler.enqueue(...)`` runs the job
  (and whatever else is due, retries included) before it returns, and
  returns the finished job (Celery's ``task_always_eager``, RQ's
  ``is_async=False``).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from store import StoreSettings, open_store
from store.base import MAX_PAGE_SIZE, JobStore
from store.lifecycle import JobStatus, RetryPolicy
from store.models import Job
from workers import enqueueing
from workers.config import WorkerConfig
from workers.handlers import served_queues

#: Retries in the test store: fast, no jitter (drain moves the clock anyway).
TEST_STORE_SETTINGS = StoreSettings(lease_ttl_s=30.0, retry=RetryPolicy(base_s=1.0, max_delay_s=3600.0))
#: Slots of drain's worker.
DRAIN_CONCURRENCY = 4


@pytest.fixture(scope="session")
def _leasehold_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file, made once per session."""
    from store.schema_version import upgrade_schema

    path = tmp_path_factory.mktemp("leasehold-template") / "template.db"
    upgrade_schema(f"sqlite:///{path}")
    return path


@pytest.fixture
def leasehold_store(_leasehold_template: Path, tmp_path: Path) -> Iterator[JobStore]:
    """An isolated store for one test, also the default store of ``enqueue``."""
    path = tmp_path / "leasehold.db"
    shutil.copyfile(_leasehold_template, path)
    store = open_store(f"sqlite:///{path}", TEST_STORE_SETTINGS)
    enqueueing.use_store(store)
    try:
        yield store
    finally:
        enqueueing.use_store(None)
        store.close()


class Drain:
    """``drain(...)`` on one store, keeping its periodic scheduler between
    calls (a schedule seen for the first time starts with its next tick)."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self._scheduler: Any = None

    def __call__(self, *, advance: bool = True, periodic: bool = False, max_rounds: int = 100) -> list[Job]:
        """See ``drain``. ``periodic``: first enqueue the ticks of the declared
        periodic jobs due at the store's clock (move it to reach a tick:
        ``store.clock_offset_s += 86400``)."""
        if periodic:
            self._tick()
        return drain(self.store, advance=advance, max_rounds=max_rounds)

    def _tick(self) -> None:
        from workers.periodic import check_declared
        from workers.scheduler import Scheduler

        if self._scheduler is None:
            self._scheduler = Scheduler(self.store, "leasehold-drain", check_declared())
            self._scheduler.start_up()
        self._scheduler.tick(exact=True)


def drain(store: JobStore, *, advance: bool = True, max_rounds: int = 100) -> list[Job]:
    """Run ``store``'s due jobs in this process until none is due (see the
    module docstring). Raises RuntimeError if jobs are still due after
    ``max_rounds`` bursts (a handler that snoozes forever)."""
    from workers.worker import Worker

    touched: set[str] = set()
    for _ in range(max_rounds):
        before = _waiting(store)
        queues = {name for name, _ in served_queues()} | set(store.counts().by_queue)
        config = WorkerConfig(
            store_url=_url(store),
            queues=tuple((q, 1) for q in sorted(queues)),
            concurrency=DRAIN_CONCURRENCY,
            lease_ttl_s=store.settings.lease_ttl_s,
            name="leasehold-drain",
            burst=True,
            grace_s=0.0,
            recovery_enabled=False,
            log_success=False,
            store=store.settings,
        )
        Worker(config, store, install_signals=False).run()
        touched |= {job.id for job in before}
        later = [job for job in _waiting(store) if job.status is JobStatus.Scheduled]
        if not advance or not later:
            return [store.get(job_id) for job_id in sorted(touched)]
        due = min(job.retry_delay_until.timestamp() for job in later if job.retry_delay_until)
        store.clock_offset_s += max(0.0, due - store.now()) + 0.001
    raise RuntimeError(f"jobs still due after {max_rounds} drains")


def _waiting(store: JobStore) -> list[Job]:
    """Every Queued and Scheduled job (paged)."""
    jobs: list[Job] = []
    for status in (JobStatus.Queued, JobStatus.Scheduled):
        cursor = None
        while True:
            page = store.list_jobs(status=status, limit=MAX_PAGE_SIZE, cursor=cursor)
            jobs += page.items
            cursor = page.next_cursor
            if cursor is None:
                break
    return jobs


def _url(store: JobStore) -> str:
    return str(getattr(store, "url", "sqlite://"))


@pytest.fixture
def leasehold_drain(leasehold_store: JobStore) -> Callable[..., list[Job]]:
    """``drain(advance=True, periodic=False, max_rounds=100)`` on the test's store."""
    return Drain(leasehold_store)


@pytest.fixture
def leasehold_eager(leasehold_store: JobStore) -> Iterator[JobStore]:
    """Eager mode for the test: ``handler.enqueue`` returns the finished job."""

    def run_now(job: Job) -> Job:
        drain(leasehold_store)
        return leasehold_store.get(job.id)

    enqueueing.set_eager(run_now)
    try:
        yield leasehold_store
    finally:
        enqueueing.set_eager(None)
