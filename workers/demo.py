"""``make demo`` and ``leasehold demo``: the console, two worker processes
and a real workload, from a checkout or from an installed wheel alike.

Starts, all on 127.0.0.1: gunicorn serving the console and API (with the
packaged settings, ``webapp.gunicorn_conf``, and app, ``leasehold.wsgi``), a worker
supervisor with two worker processes running ``workers.demo_handlers``, and
enqueues one ``index-source`` job per ``.py`` file of this interpreter's
standard library plus a few minute-long ``long-report`` jobs. Half a minute in
it SIGKILLs the worker process holding a long job, so its leases expire and
are visibly recovered while the supervisor starts a replacement. Ctrl-C stops
everything: workers get one SIGTERM (running jobs' leases are released),
gunicorn is stopped, and nothing is left running. When a process it started
dies early (the port is taken, say), the demo says so and stops.

    .venv/bin/python -m workers.demo [--store URL] [--port 8000] [--limit N]
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from werkzeug.security import generate_password_hash

from leasehold.urls import is_sql
from store import DEFAULT_STORE_URL, StoreSettings, open_store
from store.base import JobStore
from store.models import JobSpec
from store.schema_version import upgrade_schema

#: The folder holding the ``store``, ``workers`` and ``webapp`` packages (a checkout, or site-packages).
ROOT = Path(__file__).resolve().parent.parent
#: Seconds a graceful stop may take before stragglers are killed.
STOP_TIMEOUT_S = 30.0
#: Seconds gunicorn gets to answer before the demo gives up.
WEB_START_TIMEOUT_S = 60.0


def stdlib_files(limit: int | None = None) -> list[str]:
    """Every ``.py`` file of the standard library (not site-packages), sorted."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(str(p) for p in stdlib.rglob("*.py") if "site-packages" not in p.parts)
    return files[:limit] if limit else files


@dataclass
class Demo:
    """The demo's processes and settings; ``start`` then ``stop``."""

    store_url: str
    port: int = 8000
    lease_ttl_s: float = 10.0
    recovery_interval_s: float = 2.0
    workdir: Path = ROOT
    password: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    api_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        """The LEASEHOLD_* environment of every process the demo starts."""
        env = dict(os.environ)
        env.update(
            LEASEHOLD_STORE_URL=self.store_url,
            LEASEHOLD_HANDLERS="workers.demo_handlers",
            LEASEHOLD_SECRET_KEY=secrets.token_hex(32),
            LEASEHOLD_USERS=f"operator:{generate_password_hash(self.password)}:operator",
            LEASEHOLD_API_TOKENS=f"{self.api_token}:operator:demo",
            LEASEHOLD_LEASE_TTL=str(self.lease_ttl_s),
            LEASEHOLD_RECOVERY_INTERVAL=str(self.recovery_interval_s),
            LEASEHOLD_RETRY_BASE="2",
            LEASEHOLD_WEB_ACCESSLOG="off",
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        )
        return env

    def start(self) -> None:
        """Migrate (SQL stores), then start gunicorn and the worker supervisor."""
        if self.store_url.startswith("sqlite:///"):  # the demo's own file: its folder made here
            Path(self.store_url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        if is_sql(self.store_url):
            upgrade_schema(self.store_url)
        env = self.env()
        common = {"env": env, "cwd": self.workdir, "start_new_session": True}
        web = [sys.executable, "-m", "gunicorn", "-c", "python:webapp.gunicorn_conf", "-w", "2"]
        web += ["--bind", f"127.0.0.1:{self.port}", "leasehold.wsgi:app"]
        workers = [sys.executable, "-m", "leasehold.cli", "worker", "--processes", "2"]
        workers += ["--queues", "default,reports:2", "--concurrency", "4"]
        self.procs["web"] = subprocess.Popen(web, **common)
        self.procs["workers"] = subprocess.Popen(workers, **common)

    def died(self) -> str | None:
        """The name of a started process that has exited, or None."""
        return next((name for name, proc in self.procs.items() if proc.poll() is not None), None)

    def wait_for_web(
        self, cancelled: Callable[[], bool] = lambda: False, timeout_s: float = WEB_START_TIMEOUT_S
    ) -> bool:
        """True once the console answers ``/healthz``; False when a process
        died, ``cancelled()`` turned true or time ran out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.died() is None and not cancelled():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        return True
            except OSError:
                time.sleep(0.2)
        return False

    def enqueue(self, store: JobStore, files: Sequence[str], long_jobs: int, long_s: float) -> None:
        """One index-source job per file (bulk), and ``long_jobs`` long reports."""
        store.enqueue_many([JobSpec("index-source", {"path": f}, max_retries=2, timeout_s=60) for f in files])
        for i in range(long_jobs):
            store.enqueue("long-report", {"seconds": long_s, "n": i}, queue="reports", timeout_s=300)

    def kill_a_worker(self, store: JobStore) -> tuple[int, list[str]] | None:
        """SIGKILL the worker process (not the supervisor) holding a long job;
        returns its pid and the jobs it held, or None when none holds one."""
        long_ids = {j.id for j in store.list_jobs(name="long-report", limit=50).items}
        for worker in store.workers():
            held = [j for j in worker.jobs_in_hand if j in long_ids]
            if held and worker.pid != self.procs["workers"].pid and _alive(worker.pid):
                os.kill(worker.pid, signal.SIGKILL)
                return worker.pid, list(worker.jobs_in_hand)
        return None

    def stop(self) -> None:
        """One SIGTERM each (workers release their leases), then wait; kill what remains."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def absolute_sqlite(url: str) -> str:
    """A relative SQLite URL made absolute (the demo's processes may run elsewhere)."""
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        return f"sqlite:///{Path(url.removeprefix('sqlite:///')).resolve()}"
    return url


def run(
    store_url: str,
    port: int,
    files: Sequence[str],
    long_jobs: int = 3,
    long_s: float = 60.0,
    kill_after_s: float = 30.0,
    until: Callable[[JobStore], bool] | None = None,
) -> int:
    """Run the demo until Ctrl-C (or ``until(store)`` is true); returns 0, or
    1 when one of its processes did not start or exited on its own."""
    store_url = absolute_sqlite(store_url)
    demo = Demo(store_url, port, workdir=Path.cwd())
    stopping = False

    def on_signal(_sig: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    demo.start()
    store = open_store(store_url, StoreSettings(lease_ttl_s=demo.lease_ttl_s))
    code = 0
    try:
        if not demo.wait_for_web(lambda: stopping):
            if stopping:
                return 0
            failed = demo.died() or "web"
            print(f"\nLeasehold demo: the {failed} process did not start; stopping.", flush=True)
            return 1
        demo.enqueue(store, files, long_jobs, long_s)
        print(f"\nLeasehold demo: http://127.0.0.1:{port}/  (store {store_url})", flush=True)
        print(f"  console login: operator / {demo.password}", flush=True)
        print(f"  API token:     {demo.api_token}  (curl -H 'Authorization: Bearer …')", flush=True)
        print(
            f"  {len(files)} index-source and {long_jobs} long-report jobs enqueued; Ctrl-C stops.",
            flush=True,
        )
        started, killed = time.monotonic(), None
        while not stopping and not (until and until(store)):
            if demo.died() is not None:
                print(f"\n  the {demo.died()} process exited on its own; stopping.", flush=True)
                code = 1
                break
            if killed is None and time.monotonic() - started >= kill_after_s:
                killed = demo.kill_a_worker(store)
                if killed:
                    print(f"  SIGKILLed worker pid {killed[0]} holding {len(killed[1])} jobs;", flush=True)
                    print("  its leases will expire and recovery will retry them.", flush=True)
            time.sleep(0.5)
    finally:
        print("\nStopping: workers release their leases…", flush=True)
        demo.stop()
        counts = store.counts().by_status
        print("  " + ", ".join(f"{k} {v}" for k, v in counts.items()), flush=True)
        store.close()
    return code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the Leasehold demo.")
    parser.add_argument("--store", default=os.environ.get("STORE") or DEFAULT_STORE_URL)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--limit", type=int, default=None, help="index only the first N files")
    parser.add_argument("--include", action="append", default=[], help="also index this file")
    parser.add_argument("--kill-after", type=float, default=30.0, help="seconds before a worker is killed")
    parser.add_argument("--long-jobs", type=int, default=3)
    parser.add_argument("--long-seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    files = stdlib_files(args.limit) + args.include
    return run(
        args.store,
        args.port,
        files,
        long_jobs=args.long_jobs,
        long_s=args.long_seconds,
        kill_after_s=args.kill_after,
    )


if __name__ == "__main__":
    sys.exit(main())
