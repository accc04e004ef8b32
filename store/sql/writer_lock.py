"""One SQLite writer at a time, queued without sleeping.

SQLite lets one transaction write at a time. A writer that finds the
database locked waits in SQLite's busy handler, which sleeps 1, 2, 5, 10,
15, 20, 25, 25, 25, 50, 50, 100 ms between tries (``sqliteDefaultBusyCallback``
in SQLite's ``main.c``): with the web app's threads and processes and the
workers writing at once, a write spends most of its wait asleep while the
database is free. So every write transaction of the SQL store on SQLite
(``BEGIN IMMEDIATE`` to ``COMMIT``, store/sql/plumbing.py ``tx``) first
takes ``WriterLock``: this process's threads queue on a lock, and one of
them at a time on an exclusive ``flock(2)`` of ``<database>-writer.lock``,
beside the database, which the kernel hands to the next process as soon as
it is released (or its holder dies); where there is no ``flock`` (not
POSIX), only the threads queue here. SQLite's own lock still decides: a
writer that does not take this lock (the ``sqlite3`` shell, a release
before this one during a rolling deploy) is waited for by the busy handler
as before. docs/architecture.md, "SQLite", has the figures.
"""

from __future__ import annotations

import os
import threading
import weakref
from types import ModuleType, TracebackType

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # not POSIX: threads queue here, processes in SQLite's busy handler
    fcntl = None

#: What is appended to the database's path to name the lock file.
LOCK_SUFFIX = "-writer.lock"


class WriterLock:
    """The write lock of one SQLite database for one store handle: a context
    manager, reentrant within a thread (a nested write transaction waits on
    SQLite, as it did before). The lock file is opened on first use, and
    again in a forked child (a descriptor shared with the parent would let
    both hold the lock at once). Raises OSError when the file cannot be
    created (the database's folder is not writable: nor is the database)."""

    def __init__(self, database: str) -> None:
        self.path = database + LOCK_SUFFIX
        self._fd = -1
        self._threads = threading.RLock()
        self._depth = 0
        _LIVE.add(self)

    def __enter__(self) -> None:
        self._threads.acquire()
        try:
            if self._depth == 0 and fcntl is not None:
                if self._fd < 0:
                    self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            self._depth += 1
        except BaseException:
            self._threads.release()
            raise

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._depth -= 1
        try:
            if self._depth == 0 and fcntl is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._threads.release()

    def close(self) -> None:
        """Close the lock file (it is opened again by the next write)."""
        with self._threads:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def _forked(self) -> None:
        """In a forked child (one thread): fresh thread lock, the parent's
        descriptor closed (the lock file is opened again on first use)."""
        self._threads = threading.RLock()
        self._depth = 0
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


#: Every WriterLock alive in this process, for the fork hook.
_LIVE: weakref.WeakSet[WriterLock] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for lock in list(_LIVE):
        lock._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
