"""PostgreSQL: a job-log write racing its job's removal (a canceled run's
last flush while an operator deletes the job, or retention purges it) leaves
no line behind. The removal locks the job's row first; the write holds the
rows of the jobs it found (FOR KEY SHARE) until it commits, so it either
commits before the removal deletes its lines, or waits and then finds no
job (store/sql/job_logs.py ``append``)."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import func, select, text

from store.job_logs import LogLine, append_logs
from store.lifecycle import JobStatus
from store.sql.schema import job_logs
from tests.backends import StoreHandle

WAIT_S = 10.0


@pytest.fixture
def pg_handle(handle: StoreHandle) -> StoreHandle:
    if handle.backend != "postgresql":
        pytest.skip("PostgreSQL's row locks (SQLite's writers take turns)")
    return handle


def test_a_write_that_meets_a_removal_in_flight_keeps_nothing(pg_handle: StoreHandle) -> None:
    store = pg_handle.store
    job = store.cancel(store.enqueue("t", {}).id)
    removed, commit = threading.Event(), threading.Event()

    def removal(conn) -> None:  # as delete and purge do: the row locked, then lines and job deleted
        conn.execute(text("SELECT id FROM leasehold_jobs WHERE id = :id FOR UPDATE"), {"id": job.id})
        assert store.remove_jobs(conn, [(job.id, int(JobStatus.Canceled), job.queue)]) == 1
        removed.set()
        assert commit.wait(WAIT_S)

    remover = threading.Thread(target=lambda: store.tx(removal))
    remover.start()
    assert removed.wait(WAIT_S)
    errors: list[BaseException] = []

    def write() -> None:
        try:
            append_logs(store, [LogLine(job.id, 1, store.now(), "INFO", "the run's last line")])
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    waiting = text(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    deadline = time.monotonic() + WAIT_S
    while writer.is_alive() and not store.tx(lambda c: c.execute(waiting).scalar_one(), write=False):
        assert time.monotonic() < deadline, "the write neither finished nor waited on a lock"
    assert writer.is_alive(), "the write did not wait for the removal in flight"
    commit.set()
    remover.join(WAIT_S)
    writer.join(WAIT_S)
    assert not remover.is_alive() and not writer.is_alive() and errors == []
    count = select(func.count()).select_from(job_logs).where(job_logs.c.job_id == job.id)
    assert store.tx(lambda c: c.execute(count).scalar_one(), write=False) == 0
