"""PostgreSQL tools of the fault tests.

* ``libpq_dsn`` / ``with_app_name``: URLs for psycopg, and worker URLs whose
  connections carry an ``application_name`` so a test can find (and
  terminate) exactly the workers' backends.
* ``CounterLock``: holds ``FOR UPDATE`` on the counter rows of one event kind
  (``e:claimed``, ``e:completed``). The hot-path statements bump those rows
  last, after they changed the job rows, so they stop there mid-way: a
  backend terminated while it waits is terminated *inside* its claim or ack,
  deterministically, instead of by a lucky poll of ``pg_stat_activity``.
* ``ThrowawayPostgres``: a private cluster (initdb in a temporary folder with
  the Debian binaries, fsync off) that a test may stop and start; the
  machine's shared server is never touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from glob import glob
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

#: application_name of the worker processes' connections in these tests.
WORKER_APP = "lh-fault-worker"
#: Seconds pg_ctl waits for a start or stop.
PG_CTL_WAIT_S = 30


def libpq_dsn(url: str, *, keep_query: bool = False) -> str:
    """A psycopg DSN for a SQLAlchemy URL (without its query unless asked)."""
    parsed = make_url(url).set(drivername="postgresql")
    if not keep_query:
        parsed = parsed.set(query={})
    return parsed.render_as_string(hide_password=False)


def with_app_name(url: str, name: str) -> str:
    """``url`` whose connections report ``application_name=name``."""
    return make_url(url).update_query_dict({"application_name": name}).render_as_string(hide_password=False)


def backends_of(admin: psycopg.Connection, app: str) -> list[tuple[int, str, str]]:
    """(pid, state, query) of the backends of this database with ``application_name = app``."""
    rows = admin.execute(
        "SELECT pid, coalesce(state, ''), coalesce(query, '') FROM pg_stat_activity "
        "WHERE datname = current_database() AND application_name = %s",
        (app,),
    ).fetchall()
    return [(int(pid), state, query) for pid, state, query in rows]


def terminate(admin: psycopg.Connection, pids: list[int]) -> int:
    """``pg_terminate_backend`` each pid; how many were terminated."""
    if not pids:
        return 0
    rows = admin.execute("SELECT pg_terminate_backend(p) FROM unnest(%s::int[]) AS p", (pids,)).fetchall()
    return sum(1 for (ok,) in rows if ok)


class CounterLock:
    """A session holding ``FOR UPDATE`` on every shard of one counter key.

    ``blocked(admin, app)`` lists the backends of ``app`` waiting on it (their
    statement has changed job rows and waits to bump this counter)."""

    def __init__(self, dsn: str, key: str) -> None:
        self.key = key
        self.conn = psycopg.connect(dsn)
        self.pid = self.conn.info.backend_pid
        rows = self.conn.execute(
            "SELECT shard FROM leasehold_counters WHERE key = %s FOR UPDATE", (key,)
        ).fetchall()
        if not rows:
            self.release()
            raise AssertionError(f"no counter row {key!r} yet: lock it once the workers have used it")

    def blocked(self, admin: psycopg.Connection, app: str) -> list[tuple[int, str]]:
        rows = admin.execute(
            "SELECT pid, coalesce(query, '') FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = %s AND %s = ANY(pg_blocking_pids(pid))",
            (app, self.pid),
        ).fetchall()
        return [(int(pid), query) for pid, query in rows]

    def release(self) -> None:
        with contextlib.suppress(psycopg.Error):
            self.conn.rollback()
        self.conn.close()


@contextlib.contextmanager
def admin_connection(url: str) -> Iterator[psycopg.Connection]:
    """An autocommit connection to ``url``'s database, without any application_name."""
    with psycopg.connect(libpq_dsn(url), autocommit=True) as conn:
        yield conn


# ------------------------------------------------------------ throwaway cluster
def pg_bin_dir() -> Path | None:
    """The newest /usr/lib/postgresql/*/bin holding initdb and pg_ctl, else None."""

    def version(path: str) -> tuple[int, ...]:
        part = Path(path).parent.name
        return tuple(int(x) for x in part.split(".") if x.isdigit())

    for found in sorted(glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True):
        folder = Path(found)
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ThrowawayPostgres:
    """A private PostgreSQL cluster on a spare port, in a temporary folder.

    fsync and full_page_writes are off: the tests crash the server, never
    the machine, so the OS cache keeps every committed write. synchronous_commit
    stays on: with it off a crash (``-m immediate``) loses the commits still in
    the WAL buffers, which the workers were told had succeeded. As root the
    server runs as user ``postgres`` (PostgreSQL refuses root), which is why
    the folder is made under /tmp and not in pytest's private tmp_path."""

    def __init__(
        self, bin_dir: Path, listen: tuple[str, ...] = ("127.0.0.1",), trust: str | None = None
    ) -> None:
        """``listen``: the addresses the server listens on; ``trust``: a CIDR
        whose clients connect without a password (besides the loopback's)."""
        self.bin = bin_dir
        self.listen = listen
        self.trust = trust
        self.folder = Path(tempfile.mkdtemp(prefix="lh-faults-pg-"))
        self.data = self.folder / "data"
        self.log = self.folder / "postgres.log"
        self.port = _free_port()
        self.running = False
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(
            cmd, cwd=self.folder, capture_output=True, text=True, timeout=PG_CTL_WAIT_S + 30, check=False
        )
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(args[:2])} failed ({done.returncode}): {done.stderr[-2000:]}")
        return done

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8",
                  "--locale=C", "--no-sync")  # fmt: skip
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(
                "\n# leasehold fault tests (tests/faults/pg.py)\n"
                f"listen_addresses = '{','.join(self.listen)}'\nunix_socket_directories = ''\n"
                "max_connections = 100\nfsync = off\nfull_page_writes = off\n"
                # on: a commit is in the OS (not the disk) before the client hears of it, so a
                # server crash loses nothing acknowledged; off would lose the last ~0.6 s of
                # commits, claims included, and hand the same fencing token out twice
                "synchronous_commit = on\n"
            )
        if self.trust is not None:
            with open(self.data / "pg_hba.conf", "a") as hba:
                hba.write(f"host all all {self.trust} trust\n")

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", f"-p {self.port}",
                  "-w", "-t", str(PG_CTL_WAIT_S), "start")  # fmt: skip
        self.running = True

    def stop(self, mode: str = "immediate") -> None:
        """``pg_ctl stop -m mode``: immediate is a crash (recovery at the next
        start), fast rolls back open transactions and disconnects clients."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", str(PG_CTL_WAIT_S), "stop")
        self.running = False

    def url(self, db: str = "postgres", host: str = "127.0.0.1") -> str:
        return f"postgresql+psycopg://postgres@{host}:{self.port}/{db}"

    def log_tail(self, chars: int = 5000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def cleanup(self) -> None:
        if self.running:
            with contextlib.suppress(AssertionError, subprocess.TimeoutExpired):
                self.stop("immediate")
        pidfile = self.data / "postmaster.pid"
        if pidfile.exists():  # pg_ctl could not stop it: the postmaster is ours, kill it
            with contextlib.suppress(OSError, ValueError, IndexError):
                os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)
        shutil.rmtree(self.folder, ignore_errors=True)
