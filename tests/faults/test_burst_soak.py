"""The burst path, run again and again under CPU load: enqueue, then
``flask --app wsgi worker --burst --concurrency 1`` in a real process; every
run must exit 0 with every job it was given Completed (a burst worker must
never exit 0 while a job it claimed is InProgress: docs/architecture.md,
"Shutdown").

The default suite runs LEASEHOLD_BURST_SOAK_RUNS (default 5) runs a store;
``make soak`` runs 500 on each and prints the figures.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from store.lifecycle import JobStatus
from tests.backends import StoreHandle
from tests.faults.conftest import report
from tests.workers.procs import Spawner, events

RUNS = int(os.environ.get("LEASEHOLD_BURST_SOAK_RUNS", "5"))
#: Seconds one run may take at most, on a loaded machine (a process start, a drain, an exit).
RUN_BUDGET_S = 20

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.timeout(max(300, RUNS * RUN_BUDGET_S))]
#: Busy loops beside the runs (the machine's cores kept busy, as when the suite shares them).
LOAD_PROCESSES = 2
RUN_TIMEOUT_S = 60.0


@pytest.fixture
def cpu_load() -> Iterator[None]:
    """LOAD_PROCESSES busy-looping processes for the test's duration."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(LOAD_PROCESSES)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def test_every_burst_run_completes_its_jobs_and_exits_0(
    handle: StoreHandle, spawn: Spawner, cpu_load: None
) -> None:
    store = handle.store
    started = time.monotonic()
    for run in range(RUNS):
        jobs = [store.enqueue("ledger-noop", {"run": run, "i": i}) for i in range(1 + run % 3)]
        proc = spawn.worker("--burst", "--queues", "default", "--concurrency", "1", name=f"burst-{run}")
        code = proc.wait(RUN_TIMEOUT_S)
        assert code == 0, f"run {run} exited {code}:\n{proc.log()[-4000:]}"
        for job in jobs:
            after = store.get(job.id)
            assert after.status is JobStatus.Completed, (
                run,
                after,
                events(store, job.id),
                proc.log()[-4000:],
            )
    took = time.monotonic() - started
    report(
        f"burst soak ({handle.backend}): {RUNS} runs under {LOAD_PROCESSES} busy loops, "
        f"every exit 0 and every job Completed, {took / RUNS:.2f} s a run"
    )
