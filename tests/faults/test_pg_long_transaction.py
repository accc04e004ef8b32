"""A transaction held open in another PostgreSQL session while jobs churn
one session keeps a REPEATABLE READ snapshot (so vacuum
can remove none of the row versions the churn leaves behind), another holds
``FOR UPDATE`` on the job at the head of the queue (due, highest priority,
locked before it was due so that no claim held it). Claims must keep working
(SKIP LOCKED passes the locked job, which is claimed once the lock goes),
and the claim latency before and during the hold is measured and printed.

HOLD_S is short in the default suite; ``make soak`` (LEASEHOLD_SOAK_LONG=1)
holds the transaction for a minute.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from store import StoreSettings, open_store
from store.base import JobStore
from store.lifecycle import JobStatus
from store.models import Job, JobSpec
from tests.backends import StoreHandle
from tests.conftest import handle_fixture
from tests.faults.conftest import report
from tests.faults.ledger_handlers import append_row
from tests.faults.load import Feeder
from tests.faults.oracle import all_jobs, invariants, metrics_disagreements, read_ledger, summary, unfinished
from tests.faults.pg import libpq_dsn
from tests.workers.procs import Spawner, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.slow]

handle = handle_fixture(["postgresql"])

LONG = os.environ.get("LEASEHOLD_SOAK_LONG") == "1"
#: Seconds of churn measured before the hold, and the hold itself.
BEFORE_S = 10.0 if LONG else 3.0
HOLD_S = 60.0 if LONG else 5.0
#: A claim slower than this during the hold fails the test: claims must keep working.
P99_LIMIT_S = 2.0
PROBE = "probe"
#: Jobs enqueued a second at most: churn enough to leave dead row versions
#: behind, few enough jobs for the oracle to read back in seconds.
RATE_PER_S = 500.0 if LONG else 300.0
#: Seconds after the hold begins when the row-locked job becomes due.
LOCK_DUE_S = 0.5


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by the nearest-rank method."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class ClaimProbe(threading.Thread):
    """Acts as one more worker: claims one job at a time from the workers'
    queue every few milliseconds and times each ``claim`` call (one that finds
    nothing walks the same index); a job it gets is recorded in the ledger and
    completed with its token. ``samples``: (monotonic start, seconds) a claim."""

    def __init__(self, store: JobStore, ledger: Path) -> None:
        super().__init__(name="claim-probe", daemon=True)
        self.store = store
        self.ledger = str(ledger)
        self.samples: list[tuple[float, float]] = []
        self.claimed = 0
        self.errors: list[BaseException] = []
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(30)

    def between(self, start: float, end: float) -> list[float]:
        return [s for t, s in self.samples if start <= t < end]

    def run(self) -> None:
        try:
            while not self._stop_event.is_set():
                t0 = time.monotonic()
                jobs = self.store.claim(PROBE, ["default"], 1)
                self.samples.append((t0, time.monotonic() - t0))
                if jobs:
                    self.claimed += 1
                    self._complete(jobs[0])
                self._stop_event.wait(0.005)  # one worker's pace, not a spin
        except BaseException as exc:  # reported by the test
            self.errors.append(exc)

    def _complete(self, job: Job) -> None:
        append_row(self.ledger, job.id, job.lease_token, PROBE, "ok", job.name)
        self.store.complete(job.id, job.lease_token, {"worker": PROBE}, worker_id=PROBE)


@pytest.fixture
def held(handle: StoreHandle) -> Iterator[list[psycopg.Connection]]:
    """The sessions that hold transactions; rolled back and closed at the end."""
    sessions: list[psycopg.Connection] = []
    yield sessions
    for conn in sessions:
        conn.rollback()
        conn.close()


def test_claims_keep_working_while_a_transaction_is_held_open(
    handle: StoreHandle,
    spawn: Spawner,
    ledger: Path,
    store_settings: StoreSettings,
    held: list[psycopg.Connection],
) -> None:
    store = handle.store
    feeder = Feeder(
        store, lambda i: JobSpec("ledger-noop", {"i": i}, max_retries=3), depth=200, rate_per_s=RATE_PER_S
    )
    feeder.start()
    supervisor = spawn.worker("--processes", "2", "--concurrency", "2", "--lease-ttl", "2", name="hold",
                              env={"LEASEHOLD_LEASE_TTL": "2"})  # fmt: skip
    wait_until(lambda: len(read_ledger(ledger)) >= 50, timeout=60, what="workers running jobs")
    probe = ClaimProbe(open_store(handle.url, store_settings), ledger)
    probe.start()

    t_before = time.monotonic()
    threading.Event().wait(BEFORE_S)  # the window measured, not a wait for progress
    dsn = libpq_dsn(handle.url)
    snapshot = psycopg.connect(dsn)  # psycopg opens the transaction at the first statement
    held.append(snapshot)
    snapshot.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    snapshot.execute("SELECT count(*) FROM leasehold_jobs").fetchone()
    # The head of the queue from LOCK_DUE_S into the hold on: every claim meets it
    # first and must pass it by. It is Scheduled (not due) when locked, so no
    # claim can hold it at that moment.
    parked = store.enqueue("ledger-noop", {"parked": True}, priority=100, delay_s=LOCK_DUE_S)
    locker = psycopg.connect(dsn)
    held.append(locker)
    locker.execute("SELECT id FROM leasehold_jobs WHERE id = %s FOR UPDATE NOWAIT", (parked.id,)).fetchone()
    locked_id = parked.id
    completed_at_hold = store.event_counts().get("completed", 0)
    t_hold = time.monotonic()
    threading.Event().wait(HOLD_S)
    t_release = time.monotonic()
    during_hold = store.event_counts().get("completed", 0) - completed_at_hold
    locked_status = store.get(locked_id).status
    for conn in held:
        conn.rollback()
    wait_until(lambda: store.get(locked_id).status is JobStatus.Completed, 30, "the locked job completed")

    probe.stop()
    feeder.stop()
    assert not probe.errors and not feeder.errors, (probe.errors, feeder.errors)
    assert supervisor.alive(), "the supervisor died"
    wait_until(lambda: unfinished(store) == 0, timeout=120, what="every job final")
    supervisor.signal(signal.SIGTERM)
    supervisor.wait(30)
    probe.store.close()

    before, during = probe.between(t_before, t_hold), probe.between(t_hold, t_release)
    assert before and during, f"the probe made {len(before)} claims before and {len(during)} during the hold"
    last = probe.between(t_release - HOLD_S / 5, t_release)  # the hold's last fifth: the most dead rows
    ms = {
        name: (percentile(xs, 0.5) * 1000, percentile(xs, 0.99) * 1000, len(xs))
        for name, xs in (("before", before), ("during", during), ("last", last))
    }
    jobs = all_jobs(store)
    figs = {name: f"{p50:.1f}/{p99:.1f} ms (n={n})" for name, (p50, p99, n) in ms.items()}
    report(
        f"pg transaction held {HOLD_S:g}s (snapshot + FOR UPDATE on the head job): claim p50/p99 "
        f"before {figs['before']}, during {figs['during']}, last fifth of the hold {figs['last']}; "
        f"{during_hold} jobs completed during the hold, {len(jobs)} in all ({probe.claimed} by the probe)"
    )
    assert locked_status is JobStatus.Scheduled, f"the row-locked job was {locked_status.name} in the hold"
    assert during_hold >= 10, f"only {during_hold} jobs completed while the transaction was held"
    assert ms["during"][1] / 1000 < P99_LIMIT_S, f"claim p99 {ms['during'][1]:.0f} ms during the hold"
    bad = invariants(store, read_ledger(ledger), jobs=jobs)
    bad += metrics_disagreements(handle.url, store)
    assert not bad, summary(bad)


def test_a_row_lock_on_one_held_job_does_not_cost_the_workers_other_leases(
    handle: StoreHandle, spawn: Spawner, ledger: Path, held: list[psycopg.Connection]
) -> None:
    store = handle.store
    jobs = store.enqueue_many(
        [JobSpec("ledger-long", {"i": i, "seconds": 8}, max_retries=3) for i in range(4)]
    )
    spawn.worker("--concurrency", "4", "--lease-ttl", "1", name="rowlock", env={"LEASEHOLD_LEASE_TTL": "1"})
    ids = [j.id for j in jobs]
    wait_until(lambda: all(store.get(i).status is JobStatus.InProgress for i in ids), 60, "four jobs in hand")
    locker = psycopg.connect(libpq_dsn(handle.url))
    held.append(locker)

    def lock_first() -> bool:
        try:
            locker.execute(
                "SELECT id FROM leasehold_jobs WHERE id = %s FOR UPDATE NOWAIT", (ids[0],)
            ).fetchone()
            return True
        except psycopg.errors.LockNotAvailable:  # a heartbeat was renewing it just then
            locker.rollback()
            return False

    wait_until(lock_first, 10, "the row lock on one held job")
    t_lock = time.monotonic()
    # Three lease TTLs: enough for every unrenewed lease to expire and be recovered.
    expired = [i for i in ids[1:] if wait_for_expiry(store, i, t_lock + 3.0)]
    locker.rollback()
    assert not expired, f"{len(expired)} leases the row lock did not touch expired"


def wait_for_expiry(store: JobStore, job_id: str, until: float) -> bool:
    """True as soon as ``job_id`` has a lease_expired event, False at ``until`` (monotonic)."""
    try:
        wait_until(
            lambda: any(e.kind == "lease_expired" for e in store.events(job_id)),
            max(0.0, until - time.monotonic()),
            "a lease expiry",
        )
        return True
    except AssertionError:
        return False
