"""PostgreSQL backends terminated under the store.

``pg_terminate_backend`` on the connections of a claim or an ack, caught
*inside* the statement (``pg.CounterLock`` stops it after it changed the job
rows, before it bumped the counters), and on idle worker connections while
workers churn jobs. An outcome is committed or not, never half; an ack retried
with the same token after its connection died is refused (``LeaseLost``, the
job as it was) and counts nothing twice.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import pytest

from store import StoreSettings, open_store
from store.base import JobStore
from store.errors import LeaseLost, StoreUnavailable
from store.lifecycle import JobStatus
from store.models import JobSpec
from tests.backends import StoreHandle
from tests.conftest import handle_fixture
from tests.faults.conftest import report
from tests.faults.load import Feeder
from tests.faults.oracle import (
    all_jobs,
    figures,
    invariants,
    metrics_disagreements,
    read_ledger,
    summary,
    unfinished,
)
from tests.faults.pg import (
    WORKER_APP,
    CounterLock,
    admin_connection,
    backends_of,
    libpq_dsn,
    terminate,
    with_app_name,
)
from tests.workers.procs import Spawner, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.slow]

handle = handle_fixture(["postgresql"])

T = TypeVar("T")
#: application_name of the test's own probing store.
PROBE_APP = "lh-fault-probe"
LONG = os.environ.get("LEASEHOLD_SOAK_LONG") == "1"
#: Jobs the feeder may enqueue (it is stopped once the terminations are done; claims
#: and acks must keep coming until then, or no statement would wait on the lock).
JOBS = 100_000 if LONG else 20_000
#: Terminations inside claims, inside acks, and of every idle worker connection.
ROUNDS = 10 if LONG else 3
#: Completions recorded after each termination before the next one.
ACKS_BETWEEN = 20


@pytest.fixture
def probe(handle: StoreHandle, store_settings: StoreSettings) -> Iterator[JobStore]:
    """A second store on the test's database whose connections say PROBE_APP."""
    store = open_store(with_app_name(handle.url, PROBE_APP), store_settings)
    yield store
    store.close()


def answered(call: Callable[[], T], unavailable: list[int]) -> T:
    """``call()``, retried while the store is unavailable (a dead pooled
    connection fails once, then the pool reconnects); counts those failures."""
    for _ in range(5):
        try:
            return call()
        except StoreUnavailable:
            unavailable.append(1)
    raise AssertionError("the store stayed unavailable")


def kill_probe_connections(url: str) -> int:
    with admin_connection(url) as admin:
        return terminate(admin, [pid for pid, _, _ in backends_of(admin, PROBE_APP)])


def test_an_ack_retried_after_its_connection_died_is_refused_and_counted_once(
    handle: StoreHandle, probe: JobStore
) -> None:
    """complete, complete_many and fail, each retried with the token of a
    completion that already committed, on a connection that was terminated."""
    jobs = probe.enqueue_many([JobSpec("x", {"i": i}) for i in range(3)])
    claimed = {j.id: j.lease_token for j in probe.claim("w-1", ["default"], 3)}
    assert set(claimed) == {j.id for j in jobs}
    first, second, third = (j.id for j in jobs)
    probe.complete(first, claimed[first], {"n": 1})
    probe.complete_many([(second, claimed[second], {"n": 2}), (third, claimed[third], {"n": 3})])
    unavailable: list[int] = []

    retries: list[tuple[str, Callable[[], object]]] = [
        ("complete", lambda: probe.complete(first, claimed[first], {"n": 1})),
        ("complete_many", lambda: probe.complete_many([(second, claimed[second], {"n": 2})])[0]),
        (
            "fail",
            lambda: probe.fail(third, claimed[third], {"type": "E", "message": "late", "traceback": None}),
        ),
    ]
    for what, retry in retries:
        assert kill_probe_connections(handle.url) > 0, "no probe connection to terminate"
        try:
            outcome = answered(retry, unavailable)
        except LeaseLost as exc:
            outcome = exc
        if isinstance(outcome, LeaseLost):
            assert outcome.status == "Completed", f"{what}: {outcome}"
        else:  # the store may also answer with the completed job, unchanged
            assert outcome.status is JobStatus.Completed, f"{what}: {outcome}"  # type: ignore[attr-defined]
    for job_id, n in ((first, 1), (second, 2), (third, 3)):
        job = probe.get(job_id)
        assert (job.status, job.lease_token, job.result) == (JobStatus.Completed, claimed[job_id], {"n": n})
        assert [e.kind for e in probe.events(job_id)].count("completed") == 1
    assert probe.counts().by_status["Completed"] == 3
    assert probe.event_counts()["completed"] == 3
    report(
        f"pg terminate: 3 acks retried on a terminated connection, 3 refused, nothing recounted "
        f"({len(unavailable)} StoreUnavailable first)"
    )


def test_a_claim_or_an_ack_terminated_midway_changes_nothing(handle: StoreHandle, probe: JobStore) -> None:
    """The backend dies after the statement changed the job row and before it
    bumped the counters: the whole statement is rolled back."""
    warm = probe.enqueue("x", {"warm": True})
    [held] = probe.claim("w-1", ["default"])
    probe.complete(warm.id, held.lease_token, None)  # the counter rows exist for this shard
    job = probe.enqueue("x", {"i": 1})
    before = (probe.counts().by_status, probe.event_counts())
    unavailable: list[int] = []

    def interrupted(key: str, call: Callable[[], object]) -> BaseException | None:
        """Run ``call`` in a thread while ``key`` is locked; terminate its
        backend once it waits on the lock; what it raised."""
        lock = CounterLock(libpq_dsn(handle.url), key)
        try:
            with ThreadPoolExecutor(1) as pool, admin_connection(handle.url) as admin:
                future = pool.submit(call)
                pids = wait_until(
                    lambda: [p for p, _ in lock.blocked(admin, PROBE_APP)], 30, f"{key} blocked"
                )
                assert terminate(admin, pids) == len(pids)
                return future.exception(timeout=30)
        finally:
            lock.release()

    error = interrupted("e:claimed", lambda: probe.claim("w-2", ["default"]))
    assert isinstance(error, StoreUnavailable), error
    after = answered(lambda: probe.get(job.id), unavailable)
    assert (after.status, after.lease_token, after.worker_id) == (JobStatus.Queued, 0, None)
    assert (probe.counts().by_status, probe.event_counts()) == before

    [claimed] = answered(lambda: probe.claim("w-2", ["default"]), unavailable)
    assert (claimed.id, claimed.lease_token) == (job.id, 1)
    before = (probe.counts().by_status, probe.event_counts())
    error = interrupted("q:completed:default", lambda: probe.complete(job.id, 1, {"ok": True}))
    assert isinstance(error, StoreUnavailable), error
    after = answered(lambda: probe.get(job.id), unavailable)
    assert (after.status, after.lease_token, after.result) == (JobStatus.InProgress, 1, None)
    assert (probe.counts().by_status, probe.event_counts()) == before

    done = answered(lambda: probe.complete(job.id, 1, {"ok": True}), unavailable)
    assert (done.status, done.result) == (JobStatus.Completed, {"ok": True})
    assert probe.event_counts()["completed"] == 2
    assert [e.kind for e in probe.events(job.id)] == ["enqueued", "claimed", "completed"]


def test_workers_ride_through_terminated_backends(handle: StoreHandle, spawn: Spawner, ledger: Path) -> None:
    """Workers churn jobs while their backends are terminated inside claims,
    inside acks, and idle; every job completes once and the oracle holds."""
    store = handle.store
    feeder = Feeder(store, job_spec, depth=100, limit=JOBS, rate_per_s=500)
    feeder.start()
    spawn.store_url = with_app_name(handle.url, WORKER_APP)
    supervisor = spawn.worker(
        "--processes", "2", "--concurrency", "4", "--lease-ttl", "1.5", name="pgterm",
        env={"LEASEHOLD_LEASE_TTL": "1.5", "LEASEHOLD_RECOVERY_INTERVAL": "0.3"},
    )  # fmt: skip
    wait_until(lambda: len(read_ledger(ledger)) >= 30, timeout=60, what="workers running jobs")
    killed = {"claim": 0, "ack": 0, "idle": 0}
    statements: set[str] = set()

    def acks_flow(since: int) -> None:
        """Wait until more completions were recorded than ``since`` (the store answers again)."""
        wait_until(lambda: completed(store) > since, timeout=30, what="completions recorded again")

    with admin_connection(handle.url) as admin:
        for _ in range(ROUNDS):
            for key, kind in (("e:claimed", "claim"), ("q:completed:default", "ack")):
                lock = CounterLock(libpq_dsn(handle.url), key)
                try:
                    blocked = wait_until(
                        lambda lk=lock: lk.blocked(admin, WORKER_APP), 30, f"a {kind} blocked"
                    )
                    killed[kind] += terminate(admin, [pid for pid, _ in blocked])
                    statements |= {" ".join(q.split())[:60] for _, q in blocked}
                finally:
                    lock.release()
                acks_flow(completed(store) + ACKS_BETWEEN)
            idle = [pid for pid, state, _ in backends_of(admin, WORKER_APP) if state == "idle"]
            killed["idle"] += terminate(admin, idle)
            acks_flow(completed(store) + ACKS_BETWEEN)
    feeder.stop()
    assert not feeder.errors, feeder.errors

    assert supervisor.alive(), "the supervisor died"
    wait_until(lambda: unfinished(store) == 0, timeout=120, what="every job final")
    supervisor.signal(signal.SIGTERM)
    supervisor.wait(30)

    jobs = all_jobs(store)
    bad = invariants(store, read_ledger(ledger), jobs=jobs)
    bad += metrics_disagreements(handle.url, store)
    not_done = [j for j in jobs if j.status is not JobStatus.Completed]
    figs = figures(store, jobs)
    refused = store.event_counts().get("completion_refused", 0)
    report(
        f"pg terminate under load: {killed['claim']} backends killed inside a claim, {killed['ack']} inside "
        f"an ack, {killed['idle']} idle; {figs['completed']}/{figs['jobs']} completed, {figs['retries']} "
        f"retries, {figs['lease_expired']} lease expirations, {refused} refused acks, {len(bad)} violations"
    )
    assert killed["claim"] >= ROUNDS and killed["ack"] >= ROUNDS, (killed, statements)
    assert not bad, summary(bad)
    assert not not_done, [(j.id, j.status.name, j.error) for j in not_done[:10]]


def completed(store: JobStore) -> int:
    return store.event_counts().get("completed", 0)


def job_spec(i: int) -> JobSpec:
    """One in five jobs runs 0.2 s (its lease is renewed meanwhile), the rest return at once."""
    if i % 5 == 0:
        return JobSpec("ledger-long", {"i": i, "seconds": 0.2}, max_retries=10)
    return JobSpec("ledger-noop", {"i": i}, max_retries=10)
