"""Group commit of single-job enqueues: the jobs that concurrent threads
enqueue one at a time while one is being written go together in the next
write (the way a database's group commit shares one log flush among the
transactions waiting for it).

* SQLite (store/sql/sqlite.py) writes one transaction at a time
  (store/sql/writer_lock.py). Under ``POST /api/jobs`` the web processes
  held the writer lock 77 % of the time, each transaction stretched to
  0.6 ms by its own process's threads taking the GIL between its
  statements. Together: one lock, one BEGIN ... COMMIT and one bookkeeping
  round for all of them.
* Redis (store/redis/store.py): one function call for all of them
  (lua/enqueue.lua takes a chunk), whose fixed cost (the clock, the
  wake-ups, the call itself) is about half of a single enqueue's server
  instructions, and one round trip.

Leader and followers, no thread of its own: the first caller with no write
in progress writes everything pending (its own job with it); callers that
arrive meanwhile wait, and when the write ends the first of them writes
what is pending then. A caller returns once its own job is written, as
before; a single caller is written at once, alone. A batch that fails is
written again one job at a time, so each caller gets its own result or its
own error. Only jobs without idempotency or unique keys or flow options go
this way (their writes can refuse one job of a chunk).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from store.models import Job

#: Writes rows (what the store's write takes for one job) in one unit;
#: returns their Jobs in the same order.
Write = Callable[[list[Any]], list[Job]]


class _Waiter:
    """One caller's job: its row, and what became of it."""

    __slots__ = ("done", "error", "job", "lead", "row")

    def __init__(self, row: Any) -> None:
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
    """Single-job writes of concurrent callers, shared by ``write``
    (thread-safe)."""

    def __init__(self, write: Write) -> None:
        self._write = write
        self._mutex = threading.Lock()
        self._pending: list[_Waiter] = []
        self._writing = False

    def insert(self, row: Any) -> Job:
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
