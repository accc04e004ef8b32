"""SQLite writers queue on the store's writer lock (store/sql/writer_lock.py):
a write waits while another process holds it and goes on when it is
released; a forked child takes it apart from its parent."""

from __future__ import annotations

import fcntl
import os
import threading
import time

from sqlalchemy.engine import make_url

from store.lifecycle import JobStatus
from store.sql.store import SqlStore
from store.sql.writer_lock import LOCK_SUFFIX
from tests.workers.procs import wait_until


def _lock_path(store: SqlStore) -> str:
    return str(make_url(store.url).database) + LOCK_SUFFIX


def test_a_write_waits_for_the_writer_lock_of_another_holder(sqlite_store: SqlStore) -> None:
    sqlite_store.enqueue("t")  # opens the lock file
    fd = os.open(_lock_path(sqlite_store), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as another process's writer would
        done: list[str] = []
        writer = threading.Thread(target=lambda: done.append(sqlite_store.enqueue("t").id))
        writer.start()
        writer.join(0.5)
        assert writer.is_alive() and not done  # queued on the lock, not on SQLite's busy handler
        fcntl.flock(fd, fcntl.LOCK_UN)
        writer.join(10)
        assert done and sqlite_store.get(done[0]).name == "t"
    finally:
        os.close(fd)


def test_a_forked_child_takes_the_lock_apart_from_its_parent(sqlite_store: SqlStore) -> None:
    sqlite_store.enqueue("t")  # the parent's lock file is open when it forks
    with sqlite_store._writer:  # the parent holds the lock while the child writes
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                sqlite_store.enqueue("from-child")
                code = 0
            finally:
                os._exit(code)
        try:
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline:
                assert os.waitpid(pid, os.WNOHANG) == (0, 0), "the child wrote while its parent held the lock"
                time.sleep(0.02)
        except BaseException:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            raise
    reaped: list[int] = []

    def child_done() -> bool:
        got, status = os.waitpid(pid, os.WNOHANG)
        reaped.extend([status] if got else [])
        return bool(got)

    try:
        wait_until(child_done, timeout=10, what="the child's write")
    finally:
        if not reaped:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(reaped[0]) == 0
    assert sqlite_store.count_jobs(JobStatus.Queued, name="from-child") == 1
