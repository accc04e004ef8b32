"""Poison jobs in the process pool: a job that leaks memory
until its process is killed from outside (the kernel's OOM killer or a
container limit; here ``OomKiller`` plays that part), and one that kills its
own process (``crash``, ``os._exit(1)``), each on every attempt. Both must end
Failed (``ProcessExited``) once their retries are spent, while the other jobs
complete and the worker stays up.

The thread-pool variant of ``crash`` (the worker process itself dies, the
lease expires, the supervisor replaces it) is in tests/workers/test_failures.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path

import pytest

from store.lifecycle import JobStatus
from store.models import JobSpec
from tests.backends import StoreHandle
from tests.faults.conftest import HANDLERS, report
from tests.faults.oracle import all_jobs, invariants, read_ledger, summary, unfinished
from tests.workers.procs import MARKER_ENV, Spawner, events, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.slow]

#: Resident memory above which OomKiller kills one of the test's processes, MiB.
#: Workers and pool processes use well under 150 MiB; ``ledger-leak`` passes it
#: within a fraction of a second and gives up (and fails the test) at 1 GiB.
RSS_LIMIT_MIB = 400
RETRIES = 2
OTHERS = 150


class OomKiller(threading.Thread):
    """SIGKILLs any process carrying the test's marker whose resident memory
    exceeds ``limit_mib``, as the OOM killer would; ``killed`` lists
    (pid, MiB). Polls /proc every ``every_s`` seconds until stopped."""

    def __init__(self, marker: str, limit_mib: int, every_s: float = 0.01) -> None:
        super().__init__(name="oom-killer", daemon=True)
        self.needle = f"{MARKER_ENV}={marker}".encode()
        self.limit_kib = limit_mib * 1024
        self.every_s = every_s
        self.killed: list[tuple[int, int]] = []
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(10)

    def _is_ours(self, pid: int) -> bool:
        try:
            return self.needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            return False

    @staticmethod
    def _rss_kib(pid: int) -> int:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except (OSError, ValueError):
            pass
        return 0

    def run(self) -> None:
        while not self._stop_event.wait(self.every_s):
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                rss = self._rss_kib(pid := int(entry))
                if rss > self.limit_kib and self._is_ours(pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                        self.killed.append((pid, rss // 1024))


def test_poison_jobs_fail_after_their_retries_while_others_complete(
    handle: StoreHandle, spawn: Spawner, ledger: Path
) -> None:
    store = handle.store
    killer = OomKiller(spawn.marker, RSS_LIMIT_MIB)
    killer.start()
    try:
        worker = spawn.worker(
            "--pool", "process", "--concurrency", "3", name="poison",
            env={"LEASEHOLD_HANDLERS": f"{HANDLERS},tests.handlers"},
        )  # fmt: skip
        leak = store.enqueue("ledger-leak", None, max_retries=RETRIES, timeout_s=60)
        crash = store.enqueue("crash", None, max_retries=RETRIES)
        others = store.enqueue_many([JobSpec("ledger-noop", {"i": i}) for i in range(OTHERS)])
        wait_until(lambda: unfinished(store) == 0, timeout=120, what="every job final")
        assert worker.alive(), "the worker died with its pool processes"
    finally:
        killer.stop()

    attempts = RETRIES + 1
    leaked, crashed = store.get(leak.id), store.get(crash.id)
    for job, code in ((leaked, "-9"), (crashed, "1")):
        assert job.status is JobStatus.Failed, f"{job.name} ended {job.status.name}"
        assert job.error is not None and job.error["type"] == "ProcessExited", job.error
        assert job.error["message"].endswith(f"exit code {code}"), job.error["message"]
        assert (job.retry_count, job.lease_expirations) == (RETRIES, 0), job
        assert len(events(store, job.id, "claimed")) == attempts
    assert len(killer.killed) == attempts, f"the OOM killer killed {killer.killed}"
    assert len({pid for pid, _ in killer.killed}) == attempts  # a fresh pool process each attempt
    done = sum(1 for j in others if store.get(j.id).status is JobStatus.Completed)
    assert done == OTHERS, f"{done} of {OTHERS} other jobs completed"

    jobs = all_jobs(store)
    bad = invariants(store, read_ledger(ledger), jobs=jobs)
    report(
        f"poison ({handle.backend}): leak killed at {[mib for _, mib in killer.killed]} MiB and crash "
        f"each failed after {attempts} attempts (ProcessExited); {done}/{OTHERS} others completed"
    )
    assert not bad, summary(bad)
