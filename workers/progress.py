"""Progress reports from handlers (``ctx.progress(fraction, message)``) to the
store, coalesced in memory and written in batches.

``ProgressReporter.report`` only keeps the latest report of each run (job id,
lease token) and returns: a handler never waits for the store. The pending
reports are written with one ``store.report_progress_many`` call (fenced by
each run's lease token like a heartbeat: a stale holder's report is refused
by the store and only logged here, the heartbeat is what stops a run that lost
its lease):

* before a run's outcome is written: the recorder flushes the runs of its batch
  before their ``complete_many`` (or, on a store that ``fetches_next``, takes
  them to ride its acks' call: ``take``), and ``workers.outcomes`` a run's
  report before its nack or release, so a finished job holds its last report;
* every FLUSH_INTERVAL_S by the reporter's own flusher thread (started with
  the first report), so the console sees a long job move.

So each run's progress is written at most about once per FLUSH_INTERVAL_S,
plus once before its outcome; between two writes the latest report wins.
A report of a run the worker dropped (lease lost) is discarded.

In a process pool each pool process has a reporter of its own, on a store
handle it opens from the worker's store URL on its first write
(``init_child``): its flusher writes long runs' reports, and ``run_in_child``
flushes a run's report before handing the outcome back, so the worker's ack
still comes after it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from itertools import groupby

from store.base import JobStore
from store.errors import StoreUnavailable
from store.job_logs import DEFAULT_LINES
from workers.job_log_book import JobLogBook

log = logging.getLogger(__name__)

#: Seconds between two periodic writes of the pending reports.
FLUSH_INTERVAL_S = 0.5

#: A run: (job id, lease token).
RunKey = tuple[str, int]
#: A pending report: (worker id, fraction, message).
Pending = tuple[str, float, str | None]


class ProgressReporter:
    """The pending progress reports of one process's runs; thread-safe.

    ``store`` is a store or a callable opening one on first write. Reports
    (``report``) never touch the store; writes (``flush``, the flusher
    thread) are serialised, so a flush that returns has stored every report
    taken before it began, including one another flush had in hand."""

    def __init__(
        self,
        store: JobStore | Callable[[], JobStore],
        flush_interval_s: float = FLUSH_INTERVAL_S,
        job_log_lines: int = DEFAULT_LINES,
    ) -> None:
        self._store = store
        self._opened: JobStore | None = store if isinstance(store, JobStore) else None
        self.flush_interval_s = flush_interval_s
        self._pending: dict[RunKey, Pending] = {}
        self._lock = threading.Lock()  # guards _pending; never held across a store call
        self._writing = threading.Lock()  # one flush at a time
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        #: The runs' ``ctx.log`` lines (workers/job_log_book.py), written with their reports.
        self.logs = JobLogBook(job_log_lines)
        self.logs.on_line = self._start_flusher

    def _handle(self) -> JobStore:
        """The store, opened on first use (called under ``_writing``)."""
        if self._opened is None:
            assert callable(self._store)
            self._opened = self._store()
        return self._opened

    # -------------------------------------------------------------- report
    def report(self, job_id: str, token: int, worker_id: str, fraction: float, message: str | None) -> None:
        """Keep ``(fraction, message)`` as the latest report of run ``(job_id,
        token)`` (checked already: ``progress_value``). Never blocks on the store."""
        with self._lock:
            self._pending[(job_id, token)] = (worker_id, fraction, message)
        self._start_flusher()

    def _start_flusher(self) -> None:
        """Start the flusher thread once (the first report or log line)."""
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="leasehold-progress", daemon=True)
                self._thread.start()

    def discard(self, key: RunKey) -> None:
        """Forget run ``key``'s pending report (the run is no longer ours)."""
        with self._lock:
            self._pending.pop(key, None)

    def pending(self) -> int:
        """Runs with a report not yet written."""
        with self._lock:
            return len(self._pending)

    # --------------------------------------------------------------- write
    def flush(self, keys: Iterable[RunKey] | None = None) -> int:
        """Write the pending reports of the runs ``keys`` (default: every run),
        one ``report_progress_many`` per worker id; returns how many the
        store took. A run with nothing pending costs nothing (no call at all
        when none has). Raises StoreUnavailable after putting the reports
        back (unless a newer one came meanwhile): the caller may retry."""
        keys = None if keys is None else list(keys)
        with self._writing:
            self._write_logs(keys)
            with self._lock:
                if keys is None:
                    taken, self._pending = self._pending, {}
                else:
                    taken = {k: p for k in keys if (p := self._pending.pop(k, None)) is not None}
            if not taken:
                return 0
            try:
                return self._write(taken)
            except StoreUnavailable:
                with self._lock:
                    for key, report in taken.items():
                        self._pending.setdefault(key, report)
                raise

    def take(self, keys: Iterable[RunKey]) -> list[tuple[str, int, float, str | None]]:
        """Take the pending reports of the runs ``keys`` out, to be written by
        the caller with their acks (``JobStore.complete_and_claim``):
        ``(job_id, token, fraction, message)`` each. Waits for a flush in
        progress, so no older report of these runs is written after them."""
        keys = list(keys)
        with self._writing:
            self._write_logs(keys)
            with self._lock:
                taken = {k: p for k in keys if (p := self._pending.pop(k, None)) is not None}
        return [(job_id, token, f, m) for (job_id, token), (_, f, m) in taken.items()]

    def restore(self, reports: Iterable[tuple[str, int, float, str | None]], worker_id: str) -> None:
        """Put reports ``take`` gave back (their acks were not written), unless
        a newer one came meanwhile."""
        with self._lock:
            for job_id, token, fraction, message in reports:
                self._pending.setdefault((job_id, token), (worker_id, fraction, message))

    def _write_logs(self, keys: list[RunKey] | None) -> None:
        """Write the runs' pending log lines (called under ``_writing``); a
        failure is logged and the lines kept for the next write: a log line
        never holds up an outcome."""
        if not self.logs.pending():
            return
        try:
            self.logs.write(self._handle(), keys)
        except Exception as exc:
            log.warning("job log lines not recorded yet (%d pending): %s", self.logs.pending(), exc)

    def _write(self, taken: dict[RunKey, Pending]) -> int:
        store, written = self._handle(), 0
        items = sorted(taken.items(), key=lambda item: item[1][0])
        for worker_id, group in groupby(items, key=lambda item: item[1][0]):
            reports = [(job_id, token, f, m) for (job_id, token), (_, f, m) in group]
            answers = store.report_progress_many(reports, worker_id=worker_id)
            for (job_id, _, _, _), refused in zip(reports, answers, strict=True):
                if refused is None:
                    written += 1
                else:
                    log.info("progress of job %s refused: %s", job_id, refused)
        return written

    # ------------------------------------------------------------- flusher
    def _run(self) -> None:
        while not self._wake.wait(self.flush_interval_s):
            self._flush_quietly()

    def _flush_quietly(self) -> None:
        try:
            self.flush()
        except StoreUnavailable as exc:
            log.warning("progress reports not recorded yet (%d pending): %s", self.pending(), exc)
        except Exception:  # never lose the thread: a report is a hint
            log.exception("writing progress reports failed")

    def close(self) -> None:
        """Stop the flusher thread and write what is pending (once more; a
        store outage then loses it: a report is a hint)."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._wake.set()
        if thread is not None:
            thread.join(timeout=5)
        self._flush_quietly()


_child: ProgressReporter | None = None


def init_child(handlers: list[str], store_url: str | None, job_log_lines: int = DEFAULT_LINES) -> None:
    """Initializer of a pool process: load the handlers, and report progress
    through a store handle of its own, opened on the first write."""
    global _child
    from workers.handlers import load_handlers

    load_handlers(handlers)
    if store_url:
        from store import open_store

        _child = ProgressReporter(lambda: open_store(store_url), job_log_lines=job_log_lines)


def child_reporter() -> ProgressReporter | None:
    """This pool process's reporter (None outside a pool process)."""
    return _child
