"""The measurements every system gets, the same code for all: the peers' scripts
run it in bench/.peers-venv, Leasehold's (leasehold.py) in the main venv. Needs
only redis-py and /proc.

A system is a ``System`` subclass: its worker command for a configuration, its
single and bulk enqueue, and how to empty itself. ``main(System)`` reads one
JSON spec from argv[1], runs the measurements it names and prints ``RESULT
{json}``; run.py starts one such process per system and run.

Measurements (each starts from an empty system, ``reset()``):

* single: ``enqueue_one(None)`` ×n, the public one-job-a-call API, no worker
  running; jobs/s.
* bulk: ``enqueue_bulk(n)``, the system's bulk API in calls of BULK_CHUNK jobs;
  skipped where it has none.
* drain: n no-op jobs enqueued (bulk where there is one), then the workers
  started; jobs/s from the first completion seen to the last (start-up left
  out). A peer's drain stops being timed ``cap_s`` seconds after its first
  completion (the rate is then over the jobs done by then: a slow peer needs
  no 10,000 jobs for a steady rate); Leasehold's is never capped, since every
  job is checked afterwards. The no-op task INCRs COUNTER (Leasehold: ``count()`` reads its store
  instead). Also the CPU the worker processes used per job over that span
  (utime + stime + children's, from /proc), the store server's CPU per job
  over the same span (server-wide: other clients of the server count too) and
  the peak RSS (VmHWM) of each worker process.
* latency: the workers started, left idle; then jobs one at a time, each after
  a random 0–gap_ms pause: the driver takes ``time.time()``, enqueues the stamp
  task with a sequence number, and BLPOPs TIMES; the task RPUSHes ``"<seq>
  <time.time()>"`` there. Latency: the task's time minus the driver's (one
  clock, one machine), so the enqueue call and the pick-up are counted, the
  ack after the task body is not, for any system.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

HERE = Path(__file__).resolve().parent
URL = os.environ.get("BENCH_PEERS_REDIS_URL", "redis://127.0.0.1:6379/13")
COUNTER = "bench-peers:done"
TIMES = "bench-peers:times"
#: Seconds between two reads of the completion count during a drain.
POLL_S = 0.02
#: Seconds between two walks of /proc for the workers' process tree.
TREE_S = 0.5
#: Jobs a bulk enqueue call carries.
BULK_CHUNK = 1000
#: Latency jobs sent first and not counted (the first waits for the workers to start).
WARMUP = 3
CLK_TCK = os.sysconf("SC_CLK_TCK")


def client() -> redis.Redis:
    return redis.Redis.from_url(URL)


_conn: redis.Redis | None = None


def task_conn() -> redis.Redis:
    """The Redis connection a task uses (one a process, opened on first use)."""
    global _conn
    if _conn is None:
        _conn = client()
    return _conn


def noop_body() -> None:
    """What every system's no-op task does: count itself done."""
    task_conn().incr(COUNTER)


def stamp_body(seq: int) -> None:
    """What every system's latency task does: say when it ran."""
    task_conn().rpush(TIMES, f"{seq} {time.time()!r}")


class System:
    """One system under test. Subclasses set ``name`` and ``server``
    ("redis" or "postgresql": whose CPU is measured), and implement the methods
    below; ``config`` is a dict from the system's DEFAULT or SWEEP."""

    name = "?"
    server = "redis"
    #: The configuration used unless run.py passes another (--sweep).
    DEFAULT: dict[str, Any] = {}
    #: The configurations ``--sweep`` tries.
    SWEEP: list[dict[str, Any]] = []
    #: What the bulk enqueue is (None: the system has no bulk API).
    BULK: str | None = None
    #: Whether a drain may stop being timed after ``cap_s`` (see the module's docstring).
    CAPPED = True

    def __enter__(self) -> System:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def worker(self, config: dict[str, Any]) -> list[str]:
        raise NotImplementedError

    def worker_env(self) -> dict[str, str]:
        return dict(os.environ, PYTHONPATH=str(HERE), BENCH_PEERS_REDIS_URL=URL)

    def cwd(self) -> Path:
        return HERE

    def describe(self, config: dict[str, Any]) -> str:
        raise NotImplementedError

    def enqueue_one(self, seq: int | None) -> None:
        """One job through the one-job API: the no-op task (seq None) or the stamp task."""
        raise NotImplementedError

    def enqueue_bulk(self, n: int) -> None:
        raise NotImplementedError

    def enqueue_for_drain(self, n: int) -> None:
        if self.BULK:
            self.enqueue_bulk(n)
        else:
            for _ in range(n):
                self.enqueue_one(None)

    def count(self) -> int:
        return int(task_conn().get(COUNTER) or 0)

    def check(self) -> None:
        """After a drain: raise AssertionError when a guarantee was not kept."""

    def reset(self) -> None:
        """Remove every job and mark (the peers' Redis database is theirs alone)."""
        task_conn().flushdb()


# ------------------------------------------------------------ processes
def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(entry.name))
    return kids


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    kids, out = _children(), [pid]
    for p in out:
        out.extend(kids.get(p, []))
    return out


def cpu_s(pids: list[int]) -> float:
    """utime + stime + cutime + cstime of ``pids`` (children reaped by a
    process count in its own figures), seconds."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])
        except (OSError, ValueError, IndexError):
            pass
    return total / CLK_TCK


def rss_peak_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def server_cpu_s(server: str) -> float:
    """CPU seconds the store server has used so far (all its clients); NaN for a
    store with no server (SQLite: its work is in the workers' own CPU)."""
    if server not in ("redis", "postgresql"):
        return float("nan")
    if server == "redis":
        info = task_conn().info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/comm") as f:
                    if f.read().strip() in ("postgres", "postmaster"):
                        pids.append(int(entry.name))
            except OSError:
                pass
    return cpu_s(pids)


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM the workers' process group, SIGKILL it after 10 s."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        except ProcessLookupError:
            pass


class Workers:
    """The system's workers for one measurement, in a process group of their
    own; stderr to a temporary file (a pipe could fill and stall them)."""

    def __init__(self, system: System, config: dict[str, Any]) -> None:
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by __exit__)
        self.proc = subprocess.Popen(
            system.worker(config),
            cwd=system.cwd(),
            env=system.worker_env(),
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            start_new_session=True,
        )
        self.pids = [self.proc.pid]
        self.peaks: dict[int, float] = {}
        self._walked = 0.0

    def walk(self, force: bool = False) -> list[int]:
        """The process tree (walked at most every TREE_S unless ``force``); records peak RSS."""
        now = time.perf_counter()
        if force or now - self._walked > TREE_S:
            self.pids, self._walked = tree(self.proc.pid), now
            for pid in self.pids:
                self.peaks[pid] = max(self.peaks.get(pid, 0.0), rss_peak_mb(pid))
        return self.pids

    def failed(self) -> str | None:
        if self.proc.poll() is None:
            return None
        self.log.seek(0)
        err = self.log.read().decode(errors="replace")[-1500:]
        return f"workers exited with {self.proc.returncode}: {err}"

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        stop(self.proc)
        self.log.close()


# --------------------------------------------------------- measurements
def single(system: System, n: int) -> float:
    system.reset()
    t0 = time.perf_counter()
    for _ in range(n):
        system.enqueue_one(None)
    return n / (time.perf_counter() - t0)


def bulk(system: System, n: int) -> float:
    system.reset()
    t0 = time.perf_counter()
    system.enqueue_bulk(n)
    return n / (time.perf_counter() - t0)


def drain(
    system: System, config: dict[str, Any], jobs: int, timeout: float, cap_s: float = 0.0
) -> dict[str, float]:
    """Rates, CPU per job and peak RSS of one drain of ``jobs`` no-op jobs
    (timed until ``cap_s`` after the first completion when the system is CAPPED
    and ``cap_s`` > 0; ``jobs_timed`` says how many were)."""
    system.reset()
    system.enqueue_for_drain(jobs)
    t0 = time.perf_counter()
    first = None
    with Workers(system, config) as w:
        while True:
            n = system.count()
            now = time.perf_counter()
            if n and first is None:
                first = (now, n, cpu_s(w.walk(force=True)), server_cpu_s(system.server))
            capped = system.CAPPED and cap_s > 0 and first is not None and now - first[0] > cap_s
            if n >= jobs or capped:
                jobs = min(n, jobs)
                end = (now, cpu_s(w.walk(force=True)), server_cpu_s(system.server))
                break
            if now - t0 > timeout:
                raise TimeoutError(f"{n}/{jobs} done after {timeout:.0f} s")
            if (err := w.failed()) is not None:
                raise RuntimeError(f"at {n}/{jobs}: {err}")
            w.walk()
            time.sleep(POLL_S)
        peaks = [mb for mb in w.peaks.values() if mb > 0]
    system.check()
    counted = jobs - first[1]
    span = end[0] - first[0]
    return {
        "rate_steady": counted / span if span > 0 else float("nan"),
        "rate_wall": jobs / (end[0] - t0),
        "cpu_us": (end[1] - first[2]) / counted * 1e6 if counted else float("nan"),
        "server_cpu_us": (end[2] - first[3]) / counted * 1e6 if counted else float("nan"),
        "rss_mb": max(peaks) if peaks else float("nan"),
        "jobs_timed": jobs,
    }


def latency(system: System, config: dict[str, Any], jobs: int, gap_ms: float) -> list[float]:
    """Milliseconds from the driver's ``time.time()`` before the enqueue call to
    the task's, one job at a time, idle workers."""
    system.reset()
    conn = task_conn()
    rng = random.Random(1)
    out: list[float] = []
    with Workers(system, config) as w:
        for seq in range(-WARMUP, jobs):
            time.sleep(rng.uniform(0, gap_ms / 1000))
            t0 = time.time()
            system.enqueue_one(seq)
            deadline = time.monotonic() + (60 if seq < 0 else 10)
            while (got := conn.blpop([TIMES], timeout=1)) is None:
                if (err := w.failed()) is not None:
                    raise RuntimeError(err)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"latency job {seq} did not run")
            got_seq, t1 = got[1].decode().split()
            assert int(got_seq) == seq, f"expected job {seq}, the task said {got_seq}"
            if seq >= 0:
                out.append((float(t1) - t0) * 1000)
    return out


def measure(system: System, spec: dict[str, Any]) -> dict[str, Any]:
    """The measurements ``spec["measures"]`` names, in order, on ``system``."""
    config = spec.get("config") or system.DEFAULT
    out: dict[str, Any] = {"config": system.describe(config)}
    for what in spec["measures"]:
        try:
            if what == "single":
                out["single"] = single(system, spec["single"])
            elif what == "bulk" and system.BULK:
                out["bulk"] = bulk(system, spec["bulk"])
                out["bulk_api"] = system.BULK
            elif what == "drain":
                out["drain"] = drain(system, config, spec["jobs"], spec["timeout"], spec.get("cap_s", 0.0))
            elif what == "latency":
                out["latency_ms"] = latency(system, config, spec["latency_jobs"], spec["gap_ms"])
            elif what == "instructions":  # bench/peers/cost.py: the server under callgrind
                from instructions import instructions

                out["instructions"] = instructions(system, config, spec)
        except Exception as exc:  # reported in the table; the other measurements still run
            out.setdefault("errors", {})[what] = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        finally:
            system.reset()
    return out


def main(system_cls: type[System]) -> None:
    """argv[1]: the JSON spec (measures, sizes, config); prints ``RESULT {json}``."""
    spec = json.loads(sys.argv[1])
    if spec.get("list_sweep"):  # run.py asks which configurations --sweep tries
        print("RESULT " + json.dumps({"sweep": system_cls(**spec.get("system_args", {})).SWEEP}), flush=True)
        return
    with system_cls(**spec.get("system_args", {})) as system:
        result = measure(system, spec)
    print("RESULT " + json.dumps(result), flush=True)
