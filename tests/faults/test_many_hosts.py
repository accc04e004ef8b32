"""Many hosts: workers on three hosts (network namespaces with addresses and
host names of their own, ``tests.faults.netns``) share one Redis store; one
host's link is cut for longer than the lease TTL while the other two work.

Each host runs one worker with two slots and no prefetch, so six gated jobs
(each runs until the test opens its gate, a file) put two in the hands of
every host. Host A's link then goes down and the gate opens: every run ends,
A's acks are stuck. The link stays down for at least three lease TTLs and
until the other hosts' recovery has expired A's two leases and they ran the
jobs again under new tokens and completed them, while they work through
short jobs. When the link comes back, A's late acks reach
the store and are refused by the fencing token. Every job ends Completed,
the ledger shows no token run twice (``oracle.invariants``), and the
console's API and workers page list the three hosts.

Root only (it makes namespaces and links); skipped with the reason elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from store import StoreSettings, open_store
from store.base import JobStore
from store.lifecycle import JobStatus, RetryPolicy
from store.models import Job, JobSpec
from store.sql import migrate
from tests.faults.conftest import HANDLERS, report
from tests.faults.netns import Network, missing
from tests.faults.oracle import all_jobs, invariants, read_ledger, summary, unfinished
from tests.faults.pg import ThrowawayPostgres, pg_bin_dir
from tests.web.console_fixtures import USERS, ConsoleClient
from tests.workers.procs import Spawner, wait_until
from webapp import create_app

pytestmark = [
    pytest.mark.faults,
    pytest.mark.slow,
]

HOSTS = ("host-a", "host-b", "host-c")
#: Worker id of each host's worker (not its host name: the host is read from the registry).
WORKERS = {host: f"w-{host[-1]}" for host in HOSTS}
CUT_HOST = "host-a"
#: Jobs held at the cut: two a host.
GATED = 6
#: Short jobs the other hosts work through meanwhile.
SHORT_JOBS = 40
#: The workers' lease TTL (procs.WORKER_ENV), seconds.
LEASE_TTL_S = 1.0
#: Shortest cut, seconds: three lease TTLs (A's writes meanwhile fail and are retried).
MIN_CUT_S = 3 * LEASE_TTL_S
API_TOKEN = "many-hosts-token"
PG_BIN = pg_bin_dir()


@pytest.fixture
def network() -> Iterator[Network]:
    reason = missing()
    if reason is not None:
        pytest.skip(reason)
    net = Network(list(HOSTS))
    try:
        net.open()
        yield net
    finally:
        net.close()


@pytest.fixture(params=["redis", "postgresql"])
def store_url(request: pytest.FixtureRequest, network: Network, tmp_path: Path) -> Iterator[str]:
    """The URL of a throwaway server of the store on the bridge's address."""
    if request.param == "redis":
        yield from _redis(network, tmp_path)
    else:
        yield from _postgres(network)


def _redis(network: Network, tmp_path: Path) -> Iterator[str]:
    """A redis-server on the bridge's address (no persistence). Short socket
    timeouts (redis-py reads them from the URL), so a cut-off worker notices
    soon; its acks are retried for longer than the cut."""
    if shutil.which("redis-server") is None:
        pytest.skip("needs redis-server on PATH")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [
        "redis-server", "--port", str(port), "--bind", network.bridge_address, "--dir", str(tmp_path),
        "--save", "", "--appendonly", "no", "--protected-mode", "no",
    ]  # fmt: skip
    with open(tmp_path / "redis.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    client = redis.Redis(host=network.bridge_address, port=port, socket_timeout=1)
    try:
        wait_until(lambda: _pings(client), timeout=30, what="redis-server up")
        yield (
            f"redis://{network.bridge_address}:{port}/0?prefix=lh-hosts&socket_timeout=2&socket_connect_timeout=1"
        )
    finally:
        client.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def _postgres(network: Network) -> Iterator[str]:
    """A private PostgreSQL cluster listening on the bridge's address, its
    hosts trusted. ``idle_in_transaction_session_timeout`` as docs/guarantees.md
    advises: a host cut off inside a transaction would otherwise keep the rows
    it locked until its link returns, and recovery skips locked rows."""
    if PG_BIN is None:
        pytest.skip("needs the PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb)")
    pg = ThrowawayPostgres(
        PG_BIN, listen=("127.0.0.1", network.bridge_address), trust=f"10.201.{network.subnet}.0/24"
    )
    try:
        pg.init()
        with open(pg.data / "postgresql.conf", "a") as conf:
            conf.write("idle_in_transaction_session_timeout = '2s'\n")
        pg.start()
        url = pg.url(host=network.bridge_address) + "?connect_timeout=2"
        migrate(url)
        yield url
    finally:
        pg.cleanup()


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def test_a_host_cut_off_past_its_leases_is_fenced_off(
    network: Network, store_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = store_url
    ledger = tmp_path / "ledger.jsonl"
    store = open_store(
        url, StoreSettings(lease_ttl_s=LEASE_TTL_S, retry=RetryPolicy(base_s=0.05, max_delay_s=1.0))
    )
    spawner = Spawner(url, tmp_path)
    request.node.leasehold_spawner = spawner  # its logs go with a failure (tests/faults/conftest.py)
    env = {"LEASEHOLD_HANDLERS": HANDLERS, "LEASEHOLD_TEST_LEDGER": str(ledger)}
    cut = next(h for h in network.hosts if h.hostname == CUT_HOST)
    victim = WORKERS[CUT_HOST]
    others = {WORKERS[h] for h in HOSTS if h != CUT_HOST}
    started = time.monotonic()
    try:
        for host in network.hosts:
            spawner.worker(
                "--concurrency", "2", "--prefetch", "0",
                name=WORKERS[host.hostname], env=env, prefix=host.prefix(),
            )  # fmt: skip
        wait_until(lambda: _hosts(store) == dict(WORKERS), timeout=60, what="a worker on each of three hosts")

        gate = tmp_path / "gate"
        gated = store.enqueue_many(
            [JobSpec("ledger-gate", {"i": i, "gate": str(gate)}) for i in range(GATED)]
        )
        held = wait_until(
            lambda: _two_each(store, gated), timeout=30, what="two gated jobs held by each host"
        )
        store.enqueue_many([JobSpec("ledger-noop", {"i": i}) for i in range(SHORT_JOBS)])
        mine = {job.id: job.lease_token for job in held if job.worker_id == victim}

        network.cut(cut)
        cut_at = time.time()
        gate.touch()
        try:
            wait_until(
                lambda: (
                    _ran_and_taken_over(store, ledger, mine, victim) and time.time() - cut_at >= MIN_CUT_S
                ),
                timeout=40,
                what=f"{victim}'s runs ended and its jobs completed by the other hosts",
            )
        finally:
            network.restore(cut)
        restored_at = time.time()
        cut_s = restored_at - cut_at
        assert cut_s > LEASE_TTL_S

        refused = wait_until(
            lambda: _late_acks_refused(store, mine, victim), timeout=40, what=f"{victim}'s late acks refused"
        )
        refused_after_s = time.time() - restored_at
        wait_until(lambda: unfinished(store) == 0, timeout=60, what="every job final")

        rows = read_ledger(ledger)
        bad = invariants(store, rows)
        assert not bad, summary(bad)
        jobs = {job.id: store.get(job.id) for job in held}
        assert all(job.status is JobStatus.Completed for job in jobs.values())
        for job_id, token in mine.items():
            job = jobs[job_id]
            assert job.worker_id in others and job.lease_token > token and job.lease_expirations >= 1
            assert [e for e in store.events(job_id) if e.kind == "lease_expired" and e.token == token]
            runs = sorted((r.token, r.worker, r.outcome) for r in rows if r.job_id == job_id)
            assert (token, victim, "ok") in runs and (job.lease_token, job.worker_id, "ok") in runs, runs
            [late] = [r for r in rows if (r.job_id, r.token) == (job_id, token)]
            assert cut_at < late.time < restored_at, "the cut host's run did not end during the cut"
        during = Counter(r.worker for r in rows if cut_at < r.time < restored_at)
        assert all(during[w] for w in others), f"the other hosts ran nothing during the cut: {during}"
        assert Counter(j.status for j in all_jobs(store)) == {JobStatus.Completed: GATED + SHORT_JOBS}

        api_hosts, page = _console(url)
        assert api_hosts == dict(WORKERS)
        assert all(host in page for host in HOSTS), "the workers page does not show the three hosts"

        report(
            f"many hosts ({url.split(':', 1)[0]}): {CUT_HOST} cut {cut_s:.1f}s (lease TTL {LEASE_TTL_S:g}s), "
            f"{len(mine)} jobs taken over, {refused} late acks refused {refused_after_s:.1f}s after, "
            f"{GATED + SHORT_JOBS} jobs completed once per token in {time.monotonic() - started:.1f}s"
        )
    finally:
        spawner.cleanup()
        store.close()


def _hosts(store: JobStore) -> dict[str, str]:
    """Host name -> worker id of the registered workers."""
    return {w.host: w.id for w in store.workers()}


def _two_each(store: JobStore, jobs: list[Job]) -> list[Job] | None:
    """The jobs, once all are InProgress and each worker holds two."""
    now = [store.get(job.id) for job in jobs]
    each = Counter(dict.fromkeys(WORKERS.values(), 2))
    if all(j.status is JobStatus.InProgress for j in now) and Counter(j.worker_id for j in now) == each:
        return now
    return None


def _ran_and_taken_over(store: JobStore, ledger: Path, mine: dict[str, int], victim: str) -> bool:
    """The victim's runs wrote their ledger rows, and the jobs were completed
    under a newer token (their leases expired meanwhile)."""
    ran = {(r.job_id, r.token) for r in read_ledger(ledger) if r.worker == victim}
    if not all((job_id, token) in ran for job_id, token in mine.items()):
        return False
    jobs = [(store.get(job_id), token) for job_id, token in mine.items()]
    return all(job.status is JobStatus.Completed and job.lease_token > token for job, token in jobs)


def _late_acks_refused(store: JobStore, mine: dict[str, int], victim: str) -> int:
    """How many refused completions the victim sent, once every one of its jobs has one."""
    refused = {
        job_id: [
            e
            for e in store.events(job_id)
            if e.kind == "completion_refused" and (e.actor, e.token) == (victim, token)
        ]
        for job_id, token in mine.items()
    }
    return sum(map(len, refused.values())) if all(refused.values()) else 0


def _console(url: str) -> tuple[dict[str, str], str]:
    """(host -> worker id from GET /api/workers, the /workers page) of a web app on the store."""
    app = create_app(
        {
            "STORE_URL": url,
            "TESTING": True,
            "SECRET_KEY": "many-hosts-secret-0123456789abcdef0123456789",
            "USERS": USERS,
            "API_TOKENS": f"{API_TOKEN}:viewer",
        }
    )
    try:
        client = app.test_client()
        response = client.get("/api/workers", headers={"Authorization": f"Bearer {API_TOKEN}"})
        assert response.status_code == 200, response.text[:500]
        hosts = {w["host"]: w["id"] for w in response.get_json()["items"]}
        console = ConsoleClient(app.test_client())
        console.login("vic")
        page = console.get("/workers")
        assert page.status_code == 200, page.text[:500]
        return hosts, page.text
    finally:
        app.extensions["leasehold"].close()
