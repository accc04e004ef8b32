"""Progress reports from handlers (``ctx.progress(fraction, message)``) to the
store, at most one write per job every MIN_INTERVAL_S seconds.

A report goes through ``store.report_progress``, fenced by the run's lease
token like a heartbeat: a stale holder's report is refused by the store and
only logged here (the heartbeat is what stops a run that lost its lease). A
report inside the interval is dropped, except the last one (fraction 1.0).
In a process pool, each pool process opens its own store handle from the
worker's store URL on its first report (``init_child``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from store.base import JobStore
from store.errors import JobNotFound, LeaseLost, StoreUnavailable

log = logging.getLogger(__name__)

#: Least time between two progress writes of one job, seconds.
MIN_INTERVAL_S = 1.0
#: Jobs whose last write time is remembered (oldest forgotten first).
REMEMBERED = 10_000


class ProgressReporter:
    """Throttled progress writes for the runs of one process; thread-safe.
    ``store`` is a store or a callable opening one on first use."""

    def __init__(self, store: JobStore | Callable[[], JobStore]) -> None:
        self._store = store
        self._opened: JobStore | None = store if isinstance(store, JobStore) else None
        self._last: OrderedDict[tuple[str, int], float] = OrderedDict()
        self._lock = threading.Lock()

    def _handle(self) -> JobStore:
        if self._opened is None:
            with self._lock:
                if self._opened is None:
                    assert callable(self._store)
                    self._opened = self._store()
        return self._opened

    def _due(self, key: tuple[str, int], fraction: float) -> bool:
        now = time.monotonic()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < MIN_INTERVAL_S and fraction < 1.0:
                return False
            self._last[key] = now
            self._last.move_to_end(key)
            while len(self._last) > REMEMBERED:
                self._last.popitem(last=False)
        return True

    def report(self, job_id: str, token: int, worker_id: str, fraction: float, message: str | None) -> bool:
        """Write one report unless throttled; True when the store took it.
        Never raises for a refused or unreachable store (a report is a hint)."""
        if not self._due((job_id, token), fraction):
            return False
        try:
            self._handle().report_progress(job_id, token, fraction, message, worker_id=worker_id)
            return True
        except (LeaseLost, JobNotFound) as exc:
            log.info("progress of job %s refused: %s", job_id, exc)
        except StoreUnavailable as exc:
            log.warning("progress of job %s not recorded: %s", job_id, exc)
        return False


_child: ProgressReporter | None = None


def init_child(handlers: list[str], store_url: str | None) -> None:
    """Initializer of a pool process: load the handlers, and report progress
    through a store handle of its own, opened on the first report."""
    global _child
    from workers.handlers import load_handlers

    load_handlers(handlers)
    if store_url:
        from store import open_store

        _child = ProgressReporter(lambda: open_store(store_url))


def child_reporter() -> ProgressReporter | None:
    """This pool process's reporter (None outside a pool process)."""
    return _child
