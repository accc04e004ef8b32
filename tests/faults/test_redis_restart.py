"""Redis restart: a private redis-server (AOF, fsync every second) is killed
with SIGKILL mid-run and restarted on the same port and directory; the
workers ride through (alive, jobs continue) and every job acknowledged more
than the fsync window before the kill is still Completed."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from store import StoreSettings, open_store
from store.errors import StoreError
from store.lifecycle import JobStatus
from store.models import JobSpec
from tests.faults.conftest import HANDLERS
from tests.faults.oracle import all_jobs, read_ledger, unfinished
from tests.faults.procutil import live_children, ours
from tests.workers.procs import Spawner, wait_until

pytestmark = [
    pytest.mark.faults,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server on PATH"),
]

JOBS = 240
#: Seconds an acknowledgement must precede the kill to be durable (appendfsync
#: everysec loses at most ~1 s; 2 s leaves room for a slow fsync).
DURABLE_AFTER_S = 2.0


class RedisServer:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        cmd = [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder),
            "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--protected-mode", "no",
        ]  # fmt: skip
        log = open(self.folder / "redis.log", "ab")  # noqa: SIM115 - the server keeps it
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        client = redis.Redis(port=self.port, socket_timeout=1)
        wait_until(lambda: _pings(client), timeout=30, what="redis-server up")
        client.close()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    folder = tmp_path / "redis"
    folder.mkdir()
    srv = RedisServer(folder)
    srv.start()
    yield srv
    srv.kill()


def test_workers_ride_through_a_redis_restart(server: RedisServer, tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{server.port}/0?prefix=lh-restart"
    ledger = tmp_path / "ledger.jsonl"
    store = open_store(url, StoreSettings(lease_ttl_s=1.0))
    spawner = Spawner(url, tmp_path)
    try:
        store.enqueue_many([JobSpec("ledger-long", {"i": i, "seconds": 0.1}) for i in range(JOBS)])
        env = {
            "LEASEHOLD_HANDLERS": HANDLERS,
            "LEASEHOLD_TEST_LEDGER": str(ledger),
            "LEASEHOLD_LEASE_TTL": "2",
        }
        supervisor = spawner.worker(
            "--processes", "2", "--concurrency", "2", "--lease-ttl", "2", name="rr", env=env
        )
        wait_until(lambda: len(read_ledger(ledger)) >= JOBS // 6, timeout=60, what="a sixth of the jobs run")
        durable = {j.id: j.lease_token for j in all_jobs(store) if j.status is JobStatus.Completed}
        children = {pid for pid, _ in live_children(store, supervisor.pid, spawner.marker)}
        assert children, "no live worker child registered"
        threading.Event().wait(DURABLE_AFTER_S)  # the AOF fsync window, not a guess at progress
        server.kill()
        runs_at_kill = len(read_ledger(ledger))
        server.start()

        wait_until(lambda: _safe(lambda: unfinished(store) == 0), timeout=90, what="every job final")
        assert supervisor.alive(), "the supervisor died"
        died = sorted(pid for pid in children if not ours(pid, spawner.marker))
        assert not died, f"worker children {died} died across the restart"
        assert len(read_ledger(ledger)) > runs_at_kill, "no job ran after the restart"
        jobs = {j.id: j for j in all_jobs(store)}
        lost = [
            f"{job_id} token {tok}: now {jobs[job_id].status.name if job_id in jobs else 'missing'}"
            for job_id, tok in durable.items()
            if job_id not in jobs
            or jobs[job_id].status is not JobStatus.Completed
            or jobs[job_id].lease_token != tok
        ]
        assert not lost, f"{len(lost)} durable completions lost: {lost[:10]}"
        assert all(j.status is JobStatus.Completed for j in jobs.values()), "a job did not complete"
        print(f"\nredis restart: {len(durable)} durable completions kept, {len(jobs)} jobs completed")
    finally:
        spawner.cleanup()
        store.close()


def _safe(check: Callable[[], bool]) -> bool:
    """``check()``, False while the store does not answer."""
    try:
        return check()
    except StoreError:
        return False
