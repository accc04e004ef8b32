"""SQLite under contention: eight worker processes on one database file run
1,000 jobs; each job completes once (ledger and events agree) and no worker
reports "database is locked"."""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path

import pytest

from store import open_store
from store.models import JobSpec
from tests.backends import StoreHandle
from tests.faults.oracle import all_jobs, invariants, read_ledger, summary, unfinished
from tests.workers.procs import Spawner, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.slow]

JOBS = 1000


@pytest.fixture
def handle(request: pytest.FixtureRequest, tmp_path: Path, store_settings):
    """SQLite only (this module replaces the every-backend fixture)."""
    url = request.getfixturevalue("sqlite_template").clone(tmp_path)
    h = StoreHandle("sqlite", url, open_store(url, store_settings))
    yield h
    h.close()


def test_eight_processes_one_file(handle: StoreHandle, spawn: Spawner, ledger: Path) -> None:
    store = handle.store
    store.enqueue_many([JobSpec("ledger-noop", {"i": i}) for i in range(JOBS)])
    supervisor = spawn.worker(
        "--processes", "8", "--concurrency", "2", "--lease-ttl", "2", name="sqlite8",
        env={"LEASEHOLD_LEASE_TTL": "2"},
    )  # fmt: skip
    wait_until(lambda: unfinished(store) == 0, timeout=120, what="every job final")
    supervisor.signal(signal.SIGTERM)
    supervisor.wait(30)

    jobs = all_jobs(store)
    rows = read_ledger(ledger)
    bad = invariants(store, rows, jobs=jobs)
    completed = Counter(job.status.name for job in jobs)["Completed"]
    ran = Counter(row.job_id for row in rows if row.outcome == "ok")
    twice = sum(1 for n in ran.values() if n > 1)
    log = supervisor.log()
    print(f"\nsqlite x8: {completed} completed, {len(rows)} runs, {twice} jobs ran twice (new token each)")
    assert completed == JOBS, f"{completed} of {JOBS} completed"
    assert "database is locked" not in log, log[-5000:]
    assert not bad, summary(bad)
