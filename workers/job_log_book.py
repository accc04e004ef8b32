"""``ctx.log``: a handler's own log lines, kept with its job's attempt
(store/job_logs.py) and written by the worker in batches.

``run_logger`` gives each run (job id, lease token) a ``logging.Logger`` of
its own, made on the handler's first ``ctx.log`` (a run that never touches
it costs nothing). Its level is INFO (``ctx.log.setLevel`` changes it); its
records go to the worker's own log too (it propagates to the logger
``leasehold.job``) and, formatted, into the process's ``JobLogBook``: only
memory, a run keeping its newest ``keep`` lines (LEASEHOLD_JOB_LOG_LINES).

The book is written where a run's progress report is (workers/progress.py
``ProgressReporter``, which owns it): before the run's ack or nack, in the
pool process before the outcome goes back, and every FLUSH_INTERVAL_S by the
reporter's flusher thread, so the job page can tail a running job. One
``store.job_logs.append_logs`` a write, whatever the number of lines and
runs; none when no run has a pending line. A store outage puts the lines
back for the next write (at most ``keep`` a run, newest kept).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable

from store.base import JobStore
from store.job_logs import DEFAULT_LINES, LogLine, append_logs, clean_message

#: The parent of every run's logger (the worker's log shows their records).
PARENT = "leasehold.job"
#: A run: (job id, lease token).
RunKey = tuple[str, int]


class JobLogBook:
    """The pending lines of one process's runs; thread-safe. ``keep``: lines
    a run keeps at most (the newest)."""

    def __init__(self, keep: int = DEFAULT_LINES) -> None:
        self.keep = keep
        self._pending: dict[RunKey, deque[LogLine]] = {}
        self._lock = threading.Lock()
        #: Called once a line is pending (the reporter starts its flusher).
        self.on_line: Callable[[], None] | None = None

    def add(self, key: RunKey, line: LogLine) -> None:
        with self._lock:
            lines = self._pending.get(key)
            if lines is None:
                lines = self._pending[key] = deque(maxlen=self.keep)
            lines.append(line)
        if self.on_line is not None:
            self.on_line()

    def pending(self) -> int:
        """Lines not written yet."""
        with self._lock:
            return sum(len(lines) for lines in self._pending.values())

    def take(self, keys: Iterable[RunKey] | None = None) -> dict[RunKey, deque[LogLine]]:
        with self._lock:
            if keys is None:
                taken, self._pending = self._pending, {}
                return taken
            return {k: lines for k in keys if (lines := self._pending.pop(k, None))}

    def restore(self, taken: dict[RunKey, deque[LogLine]]) -> None:
        """Put lines back (their write failed), before any newer line of their run."""
        with self._lock:
            for key, lines in taken.items():
                newer = self._pending.get(key)
                merged = deque(lines, maxlen=self.keep)
                merged.extend(newer or ())
                self._pending[key] = merged

    def write(self, store: JobStore, keys: Iterable[RunKey] | None = None) -> int:
        """Write the pending lines of ``keys`` (default: every run) in one
        store call; how many. Raises the store's errors after ``restore``."""
        taken = self.take(keys)
        if not taken:
            return 0
        lines = [line for run in taken.values() for line in run]
        try:
            append_logs(store, lines, self.keep)
        except Exception:
            self.restore(taken)
            raise
        return len(lines)


class _BookHandler(logging.Handler):
    """Formats a run's records into its book entry."""

    def __init__(self, book: JobLogBook, key: RunKey, attempt: int) -> None:
        super().__init__(logging.NOTSET)
        self.book, self.key, self.attempt = book, key, attempt

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if record.exc_info:
                message += "\n" + logging.Formatter().formatException(record.exc_info)
            level = record.levelname if record.levelname in logging.getLevelNamesMapping() else "INFO"
            line = LogLine(self.key[0], self.attempt, record.created, level, clean_message(message))
            self.book.add(self.key, line)
        except Exception:  # a log line never fails the handler
            self.handleError(record)


def run_logger(book: JobLogBook | None, job_id: str, token: int, attempt: int, name: str) -> logging.Logger:
    """A new logger for one run of job ``job_id`` (``attempt`` 1-based),
    named ``leasehold.job.<name>``, INFO and up kept in ``book`` (None: only
    propagated, outside a worker)."""
    logger = logging.Logger(f"{PARENT}.{name}", logging.INFO)
    logger.parent = logging.getLogger(PARENT)
    if book is not None:
        logger.addHandler(_BookHandler(book, (job_id, token), attempt))
    return logger
