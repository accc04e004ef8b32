"""Real worker processes for the worker tests, and bounded waits on the store.

Every process a test starts carries a marker in its environment; clean-up
kills every process with that marker (a supervisor's children and pool
processes included), so nothing outlives its test. Waits poll the store with
a deadline (``wait_until``); nothing sleeps a guessed time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from store.base import JobStore
from store.models import Job, JobEvent

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
FLASK = str(Path(sys.executable).parent / "flask")
MARKER_ENV = "LEASEHOLD_TEST_PROC_MARKER"
#: Generous: other test suites may share this machine's two cores.
DEFAULT_WAIT_S = 60.0

#: The environment of every worker the tests start (short leases and retries).
WORKER_ENV = {
    "LEASEHOLD_HANDLERS": "tests.handlers",
    "LEASEHOLD_LEASE_TTL": "1",
    "LEASEHOLD_RECOVERY_INTERVAL": "0.2",
    "LEASEHOLD_RECOVERY_LOCK_TTL": "5",
    "LEASEHOLD_RETRY_BASE": "0.05",
    "LEASEHOLD_RETRY_MAX_DELAY": "1",
    "LEASEHOLD_CONCURRENCY": "2",
    "LEASEHOLD_SECRET_KEY": "worker-tests-secret-0123456789abcdef0123456789",
}


class WaitTimeout(AssertionError):
    pass


def wait_until(predicate: Callable[[], T], timeout: float = DEFAULT_WAIT_S, what: str = "condition") -> T:
    """Poll ``predicate`` until it returns something truthy; return that.
    Raises WaitTimeout (an AssertionError) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:g}s waiting for {what} (last value {value!r})")
        time.sleep(delay)
        delay = min(0.1, delay * 2)


class Proc:
    """A started process with its log file."""

    def __init__(self, popen: subprocess.Popen[bytes], log_path: Path, label: str) -> None:
        self.popen = popen
        self.log_path = log_path
        self.label = label

    @property
    def pid(self) -> int:
        return self.popen.pid

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def wait(self, timeout: float = DEFAULT_WAIT_S) -> int:
        return self.popen.wait(timeout)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


class Spawner:
    """Starts workers and CLI commands on one store; kills them all at the end."""

    def __init__(self, store_url: str, folder: Path) -> None:
        self.store_url = store_url
        self.folder = folder
        self.marker = uuid.uuid4().hex
        self.procs: list[Proc] = []

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEHOLD_")}
        env.update(WORKER_ENV)
        env["LEASEHOLD_STORE_URL"] = self.store_url
        env["PYTHONPATH"] = str(REPO)
        env[MARKER_ENV] = self.marker
        env.update(extra)
        return env

    def worker(
        self,
        *args: str,
        name: str | None = None,
        env: dict[str, str] | None = None,
        prefix: Sequence[str] = (),
    ) -> Proc:
        """Start ``flask --app wsgi worker ARGS [--name NAME]``; output goes to a log file."""
        label = name or f"proc{len(self.procs)}"
        cmd = [*prefix, FLASK, "--app", "wsgi", "worker", *args]
        if name:
            cmd += ["--name", name]
        log_path = self.folder / f"{label}-{len(self.procs)}.log"
        with open(log_path, "wb") as out:
            popen = subprocess.Popen(
                cmd,
                cwd=REPO,
                env=self.env(**(env or {})),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        proc = Proc(popen, log_path, label)
        self.procs.append(proc)
        return proc

    def flask(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        input: str | None = None,
        timeout: float = DEFAULT_WAIT_S,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``flask --app wsgi ARGS`` to completion."""
        return subprocess.run(
            [FLASK, "--app", "wsgi", *args],
            cwd=REPO,
            env=self.env(**(env or {})),
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
            check=False,
        )

    def logs(self) -> str:
        return "\n".join(f"----- {p.label} (pid {p.pid}) -----\n{p.log()}" for p in self.procs)

    def cleanup(self) -> None:
        for proc in self.procs:
            proc.signal(signal.SIGCONT)
            proc.signal(signal.SIGKILL)
        kill_marked(self.marker)
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(30)


def kill_marked(marker: str) -> None:
    """SIGKILL every process whose environment carries ``marker`` (our descendants)."""
    needle = f"{MARKER_ENV}={marker}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGCONT)
                os.kill(int(entry.name), signal.SIGKILL)


# ----------------------------------------------------------------- store reads
def registered(store: JobStore, worker_id: str) -> bool:
    return any(w.id == worker_id for w in store.workers())


def events(store: JobStore, job_id: str, kind: str | None = None) -> list[JobEvent]:
    return [e for e in store.events(job_id) if kind is None or e.kind == kind]


def job_is(store: JobStore, job_id: str, status_name: str, **fields: Any) -> Job | None:
    """The job when it has ``status_name`` and every given field value, else None."""
    job = store.get(job_id)
    if job.status.name != status_name:
        return None
    return job if all(getattr(job, k) == v for k, v in fields.items()) else None


# ----------------------------------------------------------------- pausing
def holds_transaction(store_url: str, window_s: float = 0.4) -> bool:
    """True when some session keeps a write transaction open for ``window_s``
    (a paused process caught inside one would stall every other writer)."""
    if store_url.startswith("sqlite"):
        import sqlite3

        path = store_url.split(":///", 1)[1]
        conn = sqlite3.connect(path, timeout=window_s, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError:
            return True
        finally:
            conn.close()
    if store_url.startswith("postgresql"):
        import psycopg
        from sqlalchemy.engine import make_url

        dsn = make_url(store_url).set(drivername="postgresql").render_as_string(hide_password=False)
        time.sleep(window_s)  # let a stuck transaction grow older than the window
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND xact_start < now() - make_interval(secs => %s)",
                (window_s,),
            ).fetchone()
            return bool(row and row[0])
    return False  # Redis: every change is one script, nothing spans calls


def pause(proc: Proc, store_url: str, attempts: int = 20) -> None:
    """SIGSTOP ``proc`` outside any store transaction (retrying when caught inside one)."""
    for _ in range(attempts):
        proc.signal(signal.SIGSTOP)
        if not holds_transaction(store_url):
            return
        proc.signal(signal.SIGCONT)
        time.sleep(0.05)
    raise AssertionError(f"could not pause {proc.label} outside a store transaction")
