"""Group commit of single-job enqueues on SQLite.

SQLite writes one transaction at a time (store/sql/writer_lock.py), and a
web process's threads each enqueueing one job queue on that lock: under
`POST /api/jobs` the lock was held 77 % of the time, a transaction's hold
stretched to 0.6 ms by the threads of its own process taking the GIL
between its statements. ``GroupCommit`` lets the jobs that arrive while one
is being written go together in the next transaction: one writer lock, one
BEGIN ... COMMIT and one bookkeeping round for all of them (the way a
database's group commit shares one log flush among the transactions
waiting for it).

Leader and followers, no thread of its own: the first caller with no write
in progress writes everything pending (its own job with it); callers that
arrive meanwhile wait, and when the write ends the first of them writes
what is pending then. A caller returns once its own job is committed, as
before; a batch that fails is written again one job at a time, so each
caller gets its own result or its own error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from store.models import Job

#: Writes rows in one transaction; returns their Jobs in the same order.
Write = Callable[[list[dict[str, Any]]], list[Job]]


class _Waiter:
    """One caller's job: its row, and what became of it."""

    __slots__ = ("done", "error", "job", "lead", "row")

    def __init__(self, row: dict[str, Any]) -> None:
        self.row = row
        self.done = threading.Event()
        self.lead = False
        self.job: Job | None = None
        self.error: BaseException | None = None

    def result(self) -> Job:
        if self.error is not None:
            raise self.error
        assert self.job is not None
        return self.job


class GroupCommit:
    """Single-row inserts of concurrent callers, written in shared
    transactions by ``write`` (thread-safe)."""

    def __init__(self, write: Write) -> None:
        self._write = write
        self._mutex = threading.Lock()
        self._pending: list[_Waiter] = []
        self._writing = False

    def insert(self, row: dict[str, Any]) -> Job:
        """Write ``row`` (with whatever else is pending) and return its Job
        once committed. Raises what writing it alone raises."""
        me = _Waiter(row)
        with self._mutex:
            self._pending.append(me)
            lead = not self._writing
            self._writing = True
        if not lead:
            me.done.wait()
            if not me.lead:
                return me.result()
        with self._mutex:
            batch, self._pending = self._pending, []
        try:
            self._write_batch(batch)
        except BaseException as exc:  # interrupted: nobody else waits for ever
            for waiter in batch:
                if not waiter.done.is_set():
                    waiter.lead, waiter.error = False, waiter.error or exc
                    waiter.done.set()
            raise
        finally:
            with self._mutex:
                if self._pending:  # the next writer: the first that waits
                    self._pending[0].lead = True
                    self._pending[0].done.set()
                else:
                    self._writing = False
        return me.result()

    def _write_batch(self, batch: list[_Waiter]) -> None:
        """Write ``batch`` in one transaction, or (when that fails and it
        holds more than one) each alone; wake every waiter but the writer."""
        try:
            jobs = self._write([w.row for w in batch])
        except Exception as exc:
            if len(batch) == 1:
                batch[0].error = exc
            else:
                for waiter in batch:
                    try:
                        [waiter.job] = self._write([waiter.row])
                    except Exception as own:
                        waiter.error = own
        else:
            for waiter, job in zip(batch, jobs, strict=True):
                waiter.job = job
        for waiter in batch:
            waiter.lead = False
            waiter.done.set()
