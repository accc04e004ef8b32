"""Soak: a supervisor with several worker processes runs a mix of jobs while
children are killed with SIGKILL; every job must end final, the oracle's
invariants hold, and ``/metrics`` of a web app on the same store agrees with
the store's counts.

The default suite runs a short version (400 jobs, 4 processes) on every
backend; ``make soak`` a long one (LEASEHOLD_SOAK_JOBS, LEASEHOLD_SOAK_PROCESSES,
LEASEHOLD_SOAK_KILLS) and prints the summary table.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest

from store.models import JobSpec
from tests.backends import StoreHandle
from tests.faults.conftest import SOAK_RESULTS
from tests.faults.oracle import (
    all_jobs,
    figures,
    invariants,
    metrics_disagreements,
    read_ledger,
    summary,
    unfinished,
)
from tests.faults.procutil import kill_random_child
from tests.workers.procs import Spawner, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.slow]

JOBS = int(os.environ.get("LEASEHOLD_SOAK_JOBS", "400"))
PROCESSES = int(os.environ.get("LEASEHOLD_SOAK_PROCESSES", "4"))
KILLS = int(os.environ.get("LEASEHOLD_SOAK_KILLS", "4"))
LEASE_TTL_S = 1.5
#: Seconds between kills.
KILL_EVERY_S = 1.0
TIMEOUT_JOB_S = 0.5


def job_mix(n: int, rng: random.Random) -> list[JobSpec]:
    """~75% noop, ~15% flaky, ~5% long (3 x lease TTL), ~5% past their timeout."""
    specs = []
    for i in range(n):
        roll = rng.random()
        if roll < 0.05:
            specs.append(JobSpec("ledger-long", {"i": i}, max_retries=3))
        elif roll < 0.10:
            specs.append(
                JobSpec(
                    "ledger-timeout",
                    {"i": i, "seconds": 4 * TIMEOUT_JOB_S},
                    max_retries=3,
                    timeout_s=TIMEOUT_JOB_S,
                )
            )
        elif roll < 0.25:
            specs.append(JobSpec("ledger-flaky", {"i": i}, max_retries=3))
        else:
            specs.append(JobSpec("ledger-noop", {"i": i}, max_retries=3))
    return specs


def test_soak_with_kills(handle: StoreHandle, spawn: Spawner, ledger: Path) -> None:
    store = handle.store
    rng = random.Random(9)
    store.enqueue_many(job_mix(JOBS, rng))
    t0 = time.monotonic()
    supervisor = spawn.worker(
        "--processes", str(PROCESSES), "--concurrency", "4", "--lease-ttl", str(LEASE_TTL_S),
        name="soak",
        env={"LEASEHOLD_LEASE_TTL": str(LEASE_TTL_S), "LEASEHOLD_RECOVERY_INTERVAL": "0.3"},
    )  # fmt: skip
    wait_until(lambda: len(read_ledger(ledger)) >= 10, timeout=60, what="workers running jobs")

    kills, stop = 0, threading.Event()
    while kills < KILLS and unfinished(store) and not stop.wait(KILL_EVERY_S):
        if kill_random_child(store, supervisor.pid, spawn.marker, rng) is not None:
            kills += 1
    assert supervisor.alive(), "the supervisor died"

    budget = max(90.0, JOBS / 5)  # seconds; the short soak takes ~25 s on two cores
    wait_until(lambda: unfinished(store) == 0, timeout=budget, what="every job final")
    duration = time.monotonic() - t0
    supervisor.signal(signal.SIGTERM)
    supervisor.wait(30)

    jobs = all_jobs(store)
    bad = invariants(store, read_ledger(ledger), jobs=jobs)
    bad += metrics_disagreements(handle.url, store)  # what a web process exports agrees
    figs = figures(store, jobs)
    SOAK_RESULTS.append(
        {
            "backend": handle.backend,
            "processes": PROCESSES,
            "kills": kills,
            "duration_s": f"{duration:.1f}",
            "jobs_per_s": f"{len(jobs) / duration:.0f}",
            "violations": len(bad),
            **figs,
        }
    )
    print(f"\nsoak {handle.backend}: {SOAK_RESULTS[-1]}")
    assert kills >= min(3, KILLS), f"only {kills} kills happened"
    assert not bad, summary(bad)
