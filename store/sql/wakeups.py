"""Wake-ups of idle workers over PostgreSQL LISTEN/NOTIFY.

Enqueue runs ``pg_notify(JOB_CHANNEL, '<id>\n<queue>')`` (pg_statements.enqueue_jobs_pg)
in the statement that inserts ready jobs, so the notice is delivered at
commit, never before the jobs are visible. The id is there when the
statement made one job of the queue ready (else the payload starts with the
newline): a worker leases that job alone (``SqlStore.claim_notified``: the
claim's statement restricted to its primary key). Every listener gets every
notice: the first worker's lease wins, the others' find nothing. A job that
became due otherwise (a parent finished, store/sql/flow.py) is notified on
WAKEUP_CHANNEL with the queue alone. Workers of a release before
2026-11-27 listen on WAKEUP_CHANNEL only: during a rolling deploy they poll
for the jobs the new release enqueues. A worker LISTENs on a connection
of its own, outside the pool (it stays idle in LISTEN for the process's
life). NOTIFY is per database, like the jobs table. A notice sent while the
connection is down is lost; the worker's poll covers it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from store.errors import StoreUnavailable
from store.notices import Notice, Wakeups

if TYPE_CHECKING:
    import psycopg

#: The NOTIFY channel of a job that became due without an enqueue; the payload is the queue name.
WAKEUP_CHANNEL = "leasehold_wakeup"
#: The NOTIFY channel of an enqueue: ``<job id>\n<queue>``, the id empty when
#: the enqueue made several jobs of the queue ready (a job id holds no newline).
JOB_CHANNEL = "leasehold_wakeup_job"


class PgWakeups(Wakeups):
    """A LISTEN connection of one worker (psycopg 3, autocommit)."""

    def __init__(self, engine: Engine, channel: str, queues: Sequence[str]) -> None:
        self._engine = engine
        self._channel = channel
        self._queues = frozenset(queues)
        self._conn: psycopg.Connection[Any] | None = None
        #: Set by close(): a wait racing it (connecting in the listener's thread
        #: while another thread closes) closes what it opened instead of keeping it.
        self._closed = False

    def _connect(self) -> psycopg.Connection[Any]:
        """The engine's connect arguments, on a connection the pool does not own."""
        import psycopg  # here: a SQLite deployment never loads the PostgreSQL driver

        cargs, cparams = self._engine.dialect.create_connect_args(self._engine.url)
        conn = psycopg.connect(*cargs, **{**cparams, "autocommit": True})
        conn.execute(f"LISTEN {self._channel}")  # fixed identifiers, not input
        conn.execute(f"LISTEN {JOB_CHANNEL}")
        return conn

    def wait(self, timeout_s: float) -> Notice | None:
        """See Wakeups.wait: notifications for other queues (every listener
        of the channel gets them all) are skipped until the timeout."""
        import psycopg

        deadline = time.monotonic() + timeout_s
        try:
            if self._conn is None or self._conn.closed:
                if self._closed:
                    return None
                self._conn = self._connect()
                if self._closed:  # closed while connecting: nobody else will close it
                    self._drop()
                    return None
            while (left := deadline - time.monotonic()) > 0:
                for notice in self._conn.notifies(timeout=left, stop_after=1):
                    job, queue = None, notice.payload
                    if notice.channel == JOB_CHANNEL:
                        job, _, queue = notice.payload.partition("\n")
                    if queue in self._queues:
                        return Notice(queue, job or None)
            return None
        except psycopg.Error as exc:
            self._drop()  # the next wait connects again
            raise StoreUnavailable(f"SQL store unavailable (LISTEN): {exc}") from exc

    def close(self) -> None:
        self._closed = True
        self._drop()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
