"""Flow control with real worker processes: a concurrency
limit held across 4 workers × 8 slots, a rate limit's starts counted over
5 s, and a batch of 1,000 jobs whose callback runs once after every job,
with a worker killed mid-way, on every store."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from store.flow_rules import QueueLimits, Rate
from store.lifecycle import JobStatus
from store.models import JobSpec
from tests.conftest import handle_fixture
from tests.workers.procs import MARKER_ENV, Spawner, wait_until

handle = handle_fixture(["sqlite", "postgresql", "redis"])
HANDLERS = {"LEASEHOLD_HANDLERS": "tests.handlers,tests.flow_handlers"}


def _lines(path: Path) -> list[tuple[str, float, str]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        what, at, job_id = line.split()
        out.append((what, float(at), job_id))
    return out


def _cpu_s(marker: str) -> float:
    """CPU seconds (user + system) of every live process the test started."""
    import os

    needle, tick, total = f"{MARKER_ENV}={marker}".encode(), os.sysconf("SC_CLK_TCK"), 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _max_overlap(lines: list[tuple[str, float, str]]) -> int:
    running = peak = 0
    for what, _, _ in sorted(lines, key=lambda x: (x[1], x[0] == "start")):
        running += 1 if what == "start" else -1 if what == "end" else 0
        peak = max(peak, running)
    return peak


@pytest.mark.slow
def test_four_workers_with_eight_slots_never_run_more_than_the_limit(
    handle, spawn: Spawner, tmp_path: Path
) -> None:
    store = handle.store
    store.set_queue_limits("limited", QueueLimits(concurrency=3))
    log = tmp_path / "runs.log"
    store.enqueue_many(
        [
            JobSpec("flow_sample", {"log": str(log), "seconds": 0.05, "n": i}, queue="limited")
            for i in range(120)
        ]
    )
    for n in range(4):
        spawn.worker("--queues", "limited", "--concurrency", "8", name=f"w-{n}", env=HANDLERS)
    sampled: list[int] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            sampled.append(store.limit_usage("limited").running)
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        wait_until(lambda: store.counts().by_status.get("Completed", 0) == 120, 120, "120 jobs completed")
    finally:
        done.set()
        sampler.join()
    lines = _lines(log)
    assert sum(1 for x in lines if x[0] == "start") == 120
    assert _max_overlap(lines) <= 3, "the handlers saw more than 3 runs at once"
    assert max(sampled) <= 3 and max(sampled) >= 2, f"store samples {max(sampled)}"


@pytest.mark.slow
def test_a_rate_of_20_a_second_starts_100_jobs_in_5_seconds(handle, spawn: Spawner, tmp_path: Path) -> None:
    store = handle.store
    store.set_queue_limits("rated", QueueLimits(rate=Rate(20, 1.0)))
    log = tmp_path / "runs.log"
    store.enqueue_many([JobSpec("flow_sample", {"log": str(log), "n": i}, queue="rated") for i in range(400)])
    for n in range(2):
        spawn.worker("--queues", "rated", "--concurrency", "8", name=f"w-{n}", env=HANDLERS)
    wait_until(lambda: len(_lines(log)) > 0, 60, "a first start")
    cpu_before, t_before = _cpu_s(spawn.marker), time.monotonic()
    wait_until(
        lambda: _lines(log) and time.time() - min(x[1] for x in _lines(log)) > 6.5, 60, "6.5 s of runs"
    )
    # Held by the rate most of the time, the workers wait for the window
    # (the claim says when it reopens) instead of spinning on the store.
    busy = (_cpu_s(spawn.marker) - cpu_before) / (time.monotonic() - t_before)
    assert busy < 0.5, f"the workers used {busy:.0%} of a core while held by the rate limit"
    # A start is a claim (the lease's start): read from the store. The
    # handlers' own start lines lag it by the time a claimed job waits for a
    # slot, so they only bound the count loosely.
    ran = {x[2] for x in _lines(log) if x[0] == "start"}
    starts = sorted(store.get(job_id).started_at.timestamp() for job_id in ran)
    first = starts[0]
    in_five = [t for t in starts if t < first + 5.0]
    assert 98 <= len(in_five) <= 102, (
        f"{len(in_five)} starts in 5 s: {[round(t - first, 3) for t in in_five]}"
    )
    for i, t in enumerate(starts):  # no window of the period holds more than the limit
        assert sum(1 for u in starts[i:] if u < t + 0.999) <= 20, f"window at {t - first:.3f}"
    handler_starts = sorted(x[1] for x in _lines(log) if x[0] == "start")
    assert 80 <= sum(1 for t in handler_starts if t < handler_starts[0] + 5.0) <= 120


@pytest.mark.slow
def test_a_batch_callback_runs_once_after_every_job_despite_a_killed_worker(
    handle, spawn: Spawner, tmp_path: Path
) -> None:
    store = handle.store
    log = tmp_path / "runs.log"
    specs = [
        JobSpec("flow_sample", {"log": str(log), "seconds": 0.002, "n": i}, queue="b") for i in range(1000)
    ]
    batch = store.create_batch(specs, JobSpec("flow_callback", {"log": str(log)}, queue="b"))
    victim = spawn.worker("--queues", "b", "--concurrency", "4", name="w-victim", env=HANDLERS)
    spawn.worker("--queues", "b", "--concurrency", "4", name="w-other", env=HANDLERS)
    wait_until(lambda: store.get_batch(batch.id).counts.get("Completed", 0) >= 300, 120, "300 done")
    victim.signal(signal.SIGKILL)
    wait_until(
        lambda: store.get(batch.callback_job_id).status is JobStatus.Completed, 180, "the callback ran"
    )
    after = store.get_batch(batch.id)
    assert after.counts == {"Completed": 1000} and after.finished
    lines = _lines(log)
    callbacks = [x for x in lines if x[0] == "callback"]
    assert len(callbacks) == 1
    last_end = max(x[1] for x in lines if x[0] == "end")
    assert callbacks[0][1] >= last_end
    assert store.get(batch.callback_job_id).result == {"counts": {"Completed": 1000}}
