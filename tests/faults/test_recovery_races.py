"""Recovery races: workers run jobs while three operator threads cancel and
requeue random jobs and recovery callers (five ``run_recovery`` through the
lock, two bare ``recover_expired`` racing on the compare-and-set) run on a
clock moved past every lease, so they take leases from live workers. Then
every timeline must be legal, no job may count more lease expirations than
claims, and no cancel may be lost."""

from __future__ import annotations

import contextlib
import random
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from store.errors import InvalidTransition
from store.lifecycle import JobStatus
from store.models import JobSpec
from store.recovery_run import RecoveryBusy, run_recovery
from tests.backends import StoreHandle
from tests.faults.oracle import all_events, all_jobs, invariants, read_ledger, summary, unfinished
from tests.workers.procs import Spawner, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.slow]

JOBS = 150
RACE_S = 4.0
LEASE_TTL_S = 1.0


def _loop(stop: threading.Event, errors: list[BaseException], body: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        try:
            while not stop.is_set():
                body()
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    return run


def test_operators_and_recovery_race_workers(handle: StoreHandle, spawn: Spawner, ledger: Path) -> None:
    store = handle.store
    specs = [
        JobSpec("ledger-long", {"i": i, "seconds": 0.3}, max_retries=3)
        if i % 3 == 0
        else JobSpec("ledger-noop", {"i": i}, max_retries=3)
        for i in range(JOBS)
    ]
    ids = [job.id for job in store.enqueue_many(specs)]
    supervisor = spawn.worker(
        "--processes", "2", "--concurrency", "3", "--lease-ttl", str(LEASE_TTL_S),
        name="race",
        env={"LEASEHOLD_RECOVERY_INTERVAL": "0.3"},
    )  # fmt: skip
    wait_until(lambda: read_ledger(ledger), timeout=60, what="workers running jobs")

    stop, errors = threading.Event(), []
    job_locks = {job_id: threading.Lock() for job_id in ids}
    #: Per job, the operator actions that took effect, in order (the job's lock orders them).
    actions: dict[str, list[str]] = {job_id: [] for job_id in ids}

    def operator(seed: int) -> Callable[[], None]:
        rng, ops = random.Random(seed), handle.open()

        def act() -> None:
            job_id = rng.choice(ids)
            with job_locks[job_id]:
                try:
                    if rng.random() < 0.5:
                        ops.cancel(job_id, actor=f"operator:t{seed}")
                        actions[job_id].append("cancel")
                    else:
                        ops.requeue(job_id, actor=f"operator:t{seed}", reset_retries=rng.random() < 0.5)
                        actions[job_id].append("requeue")
                except InvalidTransition:
                    pass
            time.sleep(0.005)  # a human-ish pace; keeps the workers' share of the store

        return act

    def recoverer(n: int, locked: bool) -> Callable[[], None]:
        rec = handle.open()
        rec.clock_offset_s = 3 * LEASE_TTL_S  # every live lease looks expired

        def recover() -> None:
            if locked:
                with contextlib.suppress(RecoveryBusy):
                    run_recovery(rec, f"race-{n}", "race", batch=20, lock_ttl_s=5, wait_s=0.1)
            else:
                rec.recover_expired(20, owner=f"bare-{n}")
            time.sleep(0.02)

        return recover

    bodies = [operator(s) for s in range(3)]
    bodies += [recoverer(n, locked=True) for n in range(5)]
    bodies += [recoverer(n, locked=False) for n in range(5, 7)]
    threads = [threading.Thread(target=_loop(stop, errors, b), daemon=True) for b in bodies]
    for t in threads:
        t.start()
    stop.wait(RACE_S)
    stop.set()
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert supervisor.alive(), "the supervisor died"

    wait_until(lambda: unfinished(store) == 0, timeout=60, what="every job final")
    supervisor.signal(signal.SIGTERM)
    supervisor.wait(30)

    jobs = all_jobs(store)
    events = all_events(store, jobs)
    bad = invariants(store, read_ledger(ledger), operators=True, jobs=jobs, events=events)
    for job in jobs:
        done = actions[job.id]
        if done and done[-1] == "cancel" and job.status is not JobStatus.Canceled:
            bad.append(f"job {job.id}: canceled last by an operator, ended {job.status.name} (lost cancel)")
        if done and done[-1] == "requeue" and job.status is JobStatus.Canceled:
            bad.append(f"job {job.id}: requeued last by an operator, ended Canceled")
    acted = sum(1 for a in actions.values() if a)
    recovered = sum(1 for evs in events.values() for e in evs if e.kind == "lease_expired")
    print(f"\nraces {handle.backend}: {acted} jobs acted on, {recovered} expirations, {len(bad)} violations")
    assert acted > 0 and recovered > 0, "the race did not happen"
    assert not bad, summary(bad)
