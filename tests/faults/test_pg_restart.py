"""PostgreSQL restart under load: a private cluster (never the machine's shared
server) is stopped with ``pg_ctl -m immediate`` (a crash: recovery replays
the WAL at the next start) while workers run jobs, kept down for a while,
and started again. The workers must resume within RESUME_LIMIT_S, every job
must reach a final state and the oracle's invariants hold.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from store import StoreSettings, open_store
from store.base import JobStore
from store.errors import StoreError
from store.lifecycle import JobStatus, RetryPolicy
from store.models import JobSpec
from store.sql import migrate
from tests.faults.conftest import HANDLERS, report
from tests.faults.oracle import (
    all_jobs,
    figures,
    invariants,
    metrics_disagreements,
    read_ledger,
    summary,
    unfinished,
)
from tests.faults.pg import ThrowawayPostgres, pg_bin_dir
from tests.faults.procutil import live_children, ours
from tests.workers.procs import Spawner, wait_until

BIN_DIR = pg_bin_dir()
pytestmark = [
    pytest.mark.faults,
    pytest.mark.slow,
    pytest.mark.skipif(
        BIN_DIR is None, reason="needs the PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb)"
    ),
]

LONG = os.environ.get("LEASEHOLD_SOAK_LONG") == "1"
JOBS = 3000 if LONG else 400
#: Seconds the server stays down: longer than the lease TTL, so leases held
#: at the crash expire by the store's clock while nobody can renew them.
OUTAGE_S = 10.0 if LONG else 3.0
LEASE_TTL_S = 2.0
#: The workers must be working again this long after the server is back.
RESUME_LIMIT_S = 30.0


@pytest.fixture
def cluster() -> Iterator[ThrowawayPostgres]:
    assert BIN_DIR is not None
    pg = ThrowawayPostgres(BIN_DIR)
    try:
        pg.init()
        pg.start()
        yield pg
    finally:
        pg.cleanup()


def job_spec(i: int) -> JobSpec:
    """A third of the jobs run 0.3 s (so some are in hand at the crash), the rest return at once."""
    if i % 3 == 0:
        return JobSpec("ledger-long", {"i": i, "seconds": 0.3}, max_retries=10)
    return JobSpec("ledger-noop", {"i": i}, max_retries=10)


def _safe(check: Callable[[], bool]) -> bool:
    """``check()``, False while the store does not answer."""
    try:
        return check()
    except StoreError:
        return False


def completed_since(store: JobStore, t: float) -> bool:
    """A job was completed at or after ``t`` (epoch seconds, the store's clock)."""
    newest = store.list_jobs(status=JobStatus.Completed, limit=1).items
    return bool(newest) and newest[0].completed_at is not None and newest[0].completed_at.timestamp() >= t


def beating_since(store: JobStore, pids: set[int], t: float) -> bool:
    """Every worker process in ``pids`` refreshed its registry entry at or after ``t``."""
    seen = {w.pid for w in store.workers() if w.last_seen_at.timestamp() >= t}
    return pids <= seen


def test_workers_resume_after_a_postgresql_restart(
    cluster: ThrowawayPostgres, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = cluster.url()
    migrate(url)
    ledger = tmp_path / "ledger.jsonl"
    store = open_store(url, StoreSettings(lease_ttl_s=1.0, retry=RetryPolicy(base_s=0.05, max_delay_s=1.0)))
    spawner = Spawner(url, tmp_path)
    request.node.leasehold_spawner = spawner
    try:
        store.enqueue_many([job_spec(i) for i in range(JOBS)])
        env = {
            "LEASEHOLD_HANDLERS": HANDLERS,
            "LEASEHOLD_TEST_LEDGER": str(ledger),
            "LEASEHOLD_LEASE_TTL": str(LEASE_TTL_S),
            "LEASEHOLD_RECOVERY_INTERVAL": "0.3",
            "LEASEHOLD_PG_CONNECT_TIMEOUT": "2",
        }
        supervisor = spawner.worker(
            "--processes", "2", "--concurrency", "4", "--lease-ttl", str(LEASE_TTL_S), name="pgr", env=env
        )
        wait_until(lambda: len(read_ledger(ledger)) >= JOBS // 5, timeout=60, what="a fifth of the jobs run")
        children = {pid for pid, _ in live_children(store, supervisor.pid, spawner.marker)}
        assert children, "no live worker child registered"

        cluster.stop("immediate")
        runs_at_stop = len(read_ledger(ledger))
        threading.Event().wait(OUTAGE_S)  # the outage is the scenario, not a wait for progress
        runs_in_outage = len(read_ledger(ledger)) - runs_at_stop
        cluster.start()
        t_up = time.time()

        resumed: dict[str, float] = {}

        def resumed_all() -> bool:
            for what, check in (
                ("completion", lambda: completed_since(store, t_up)),
                ("beating", lambda: beating_since(store, children, t_up)),
            ):
                if what not in resumed and _safe(check):
                    resumed[what] = time.time() - t_up
            return len(resumed) == 2

        wait_until(resumed_all, RESUME_LIMIT_S, "a completion and every worker beating after the restart")
        first_completion_s, all_beating_s = resumed["completion"], resumed["beating"]

        wait_until(lambda: _safe(lambda: unfinished(store) == 0), timeout=120, what="every job final")
        assert supervisor.alive(), "the supervisor died"
        died = sorted(pid for pid in children if not ours(pid, spawner.marker))
        supervisor.signal(signal.SIGTERM)
        supervisor.wait(30)

        jobs = all_jobs(store)
        bad = invariants(store, read_ledger(ledger), jobs=jobs)
        bad += metrics_disagreements(url, store)
        figs = figures(store, jobs)
        report(
            f"pg restart (-m immediate, down {OUTAGE_S:g}s, {JOBS} jobs): first completion "
            f"{first_completion_s:.2f}s after the start, every worker beating after {all_beating_s:.2f}s; "
            f"{runs_in_outage} handler runs ended during the outage; {figs['completed']}/{figs['jobs']} "
            f"completed, {figs['lease_expired']} lease expirations, {len(died)} worker processes died"
        )
        assert not died, f"worker processes {died} died across the restart"
        assert not bad, summary(bad)
        assert figs["completed"] == JOBS, f"{figs['completed']} of {JOBS} completed"
    finally:
        spawner.cleanup()
        store.close()
