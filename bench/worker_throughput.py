"""Worker throughput and end-to-end latency with real worker processes.

Throughput: N no-op jobs enqueued with ``enqueue_many``, then 1 and then 2
``leasehold worker --burst`` processes drain them; the rate is jobs
per second from the first claim to the last completion (store timestamps,
so interpreter start-up is left out; the wall time with start-up is shown
too), and the peak RSS (VmHWM) of each worker process. Every job is
checked Completed with the no-op handler's result written by the holder of
its lease (``check_ran``).

Latency: one idle worker; jobs are enqueued one at a time, each after the
previous one completed plus a random pause (so the worker is found at every
stage of its idle backoff, 5 ms -> 200 ms); latency is ``completed_at -
created_at`` on the store's clock. p50/p99 in milliseconds.

    .venv/bin/python -m bench.worker_throughput [--jobs 20000] [--concurrency 8]
        [--latency-jobs 300] [--gap-ms 250] [--stores sqlite,postgresql,redis]

PostgreSQL and Redis come from LEASEHOLD_TEST_PG_URL / LEASEHOLD_TEST_REDIS_URL
(defaults: the local servers); each run gets its own database / key prefix,
removed afterwards. Redis is skipped when ``store.redis`` does not import.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from bench.store_throughput import fresh_url
from store import JobStore, StoreSettings, open_store
from store.lifecycle import JobStatus
from store.models import Job

REPO = Path(__file__).resolve().parent.parent

#: ``leasehold worker``: the console script's module, so that it runs without the package installed.
WORKER = [sys.executable, "-m", "leasehold.cli", "worker"]


def worker_env(url: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LEASEHOLD_") or k.startswith("LEASEHOLD_TEST")
    }
    env.update(
        LEASEHOLD_STORE_URL=url,
        LEASEHOLD_HANDLERS="tests.handlers",
        LEASEHOLD_SECRET_KEY="bench-0123456789abcdef0123456789abcdef",
        LEASEHOLD_RECOVERY_INTERVAL="5",
        PYTHONPATH=str(REPO),
    )
    return env


def start_worker(
    url: str,
    name: str,
    concurrency: int,
    burst: bool,
    log: IO[bytes] | None = None,
    queues: str | None = None,
) -> subprocess.Popen[bytes]:
    """A ``leasehold worker`` process on ``url`` (serving ``queues``, the
    ``--queues`` option, when given); its stderr goes to ``log`` (a file;
    None: a pipe, read it with ``communicate``)."""
    cmd = [*WORKER, "--concurrency", str(concurrency), "--name", name]
    if queues is not None:
        cmd += ["--queues", queues]
    if burst:
        cmd.append("--burst")
    return subprocess.Popen(
        cmd,
        cwd=REPO,
        env=worker_env(url),
        stdout=subprocess.DEVNULL,
        stderr=log if log is not None else subprocess.PIPE,
    )


def peak_rss_mb(pid: int) -> float | None:
    """VmHWM (peak resident set size) of a running process in MB; None once
    it has exited."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def wait_workers(procs: list[subprocess.Popen[bytes]], timeout_s: float) -> list[tuple[int, float]]:
    """Wait for workers; returns each one's exit code and peak RSS in MB,
    VmHWM read every 20 ms until it exits (``ru_maxrss`` of ``wait4`` would
    not do: it keeps the high-water mark of the image before ``exec``, which
    is this process's, forked). SIGKILLs them after ``timeout_s`` and raises
    TimeoutError."""
    deadline = time.monotonic() + timeout_s
    peaks = [0.0] * len(procs)
    while any(p.poll() is None for p in procs):
        for i, proc in enumerate(procs):
            peaks[i] = max(peaks[i], peak_rss_mb(proc.pid) or 0.0)
        if time.monotonic() > deadline:
            for proc in procs:
                proc.kill()
                proc.wait()
            raise TimeoutError(f"workers still running after {timeout_s:.0f} s")
        time.sleep(0.02)
    return [(proc.returncode, peak) for proc, peak in zip(procs, peaks, strict=True)]


def all_jobs(store: JobStore) -> Iterator[Job]:
    cursor = None
    while True:
        page = store.list_jobs(limit=500, cursor=cursor)
        yield from page.items
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def check_ran(
    store: JobStore, ids: Collection[str], slack: int = 10_000, progress: float | None = None
) -> tuple[float, float]:
    """Check that every job of ``ids`` is Completed with the no-op handler's
    result from the holder of its current lease (``tests.handlers.noop``
    returns the worker id and token that ran it) and, when ``progress`` is
    given, holding a progress report of that fraction. Returns the first
    ``started_at`` and last ``completed_at`` (epoch s, store clock).

    Reads Completed jobs newest first, so in a store that already holds many
    finished jobs it stops once it has seen ``ids`` (plus ``slack`` others).
    Raises AssertionError naming what is missing or wrong."""
    wanted, seen = set(ids), 0
    first, last = float("inf"), 0.0
    cursor = None
    while wanted and seen < len(ids) + slack:
        page = store.list_jobs(status=JobStatus.Completed, limit=500, cursor=cursor)
        for job in page.items:
            seen += 1
            if job.id not in wanted:
                continue
            wanted.discard(job.id)
            result = job.result or {}
            ran = result.get("token") == job.lease_token and result.get("worker") == job.worker_id
            assert ran, f"job {job.id} Completed without the no-op handler's result: {job.result}"
            if progress is not None:
                got = (job.progress or {}).get("fraction")
                assert got == progress, f"job {job.id} Completed with progress {got}, not {progress}"
            first = min(first, job.started_at.timestamp())
            last = max(last, job.completed_at.timestamp())
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert not wanted, f"{len(wanted)} of {len(ids)} jobs are not Completed (e.g. {next(iter(wanted))})"
    return first, last


@dataclass(frozen=True)
class DrainResult:
    """rate: jobs/s from the first claim to the last completion (store clock);
    wall_s: from spawning the workers to the last exit; peak_rss_mb: peak RSS
    of each worker process, MB."""

    rate: float
    wall_s: float
    peak_rss_mb: list[float]


def throughput(url: str, jobs: int, procs: int, concurrency: int, timeout_s: float = 1800) -> DrainResult:
    """Enqueue ``jobs`` no-op jobs, drain them with ``procs`` burst workers,
    check that every one ran (``check_ran``)."""
    store = open_store(url, StoreSettings())
    try:
        ids = [job.id for job in store.enqueue_many([("noop", None)] * jobs)]
        with tempfile.TemporaryFile() as log:
            t0 = time.perf_counter()
            workers = [start_worker(url, f"bench-{i}", concurrency, True, log) for i in range(procs)]
            try:
                exits = wait_workers(workers, timeout_s)
            finally:
                for w in workers:
                    if w.poll() is None:
                        w.kill()
                        w.wait()
            wall = time.perf_counter() - t0
            if any(code != 0 for code, _ in exits):
                log.seek(0)
                codes = [code for code, _ in exits]
                raise RuntimeError(f"worker exit codes {codes}: {log.read().decode()[-2000:]}")
        first, last = check_ran(store, ids)
        return DrainResult(jobs / (last - first), wall, [rss for _, rss in exits])
    finally:
        store.close()


def latency(url: str, jobs: int, concurrency: int, gap_ms: float) -> list[float]:
    """Milliseconds from enqueue to completion (store clock), one job at a time.
    Each job must be Completed by the idle worker's no-op handler."""
    store = open_store(url, StoreSettings())
    rng = random.Random(1)
    out: list[float] = []
    with tempfile.TemporaryFile() as log:
        worker = start_worker(url, "bench-idle", concurrency, burst=False, log=log)
        try:
            warm = store.enqueue("noop")
            deadline = time.monotonic() + 60
            while store.get(warm.id).status.name != "Completed":  # wait until the worker is up
                if worker.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"idle worker did not start: {log.read().decode()[-2000:]}")
                time.sleep(0.05)
            for _ in range(jobs):
                time.sleep(rng.uniform(0, gap_ms / 1000))
                job = store.enqueue("noop")
                while (done := store.get(job.id)).status.name != "Completed":
                    time.sleep(0.002)
                assert (done.result or {}).get("token") == done.lease_token, done.result
                out.append((done.completed_at - done.created_at).total_seconds() * 1000)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(60)
            store.close()
    return out


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--processes", default="1,2")
    parser.add_argument("--latency-jobs", type=int, default=300)
    parser.add_argument("--gap-ms", type=float, default=250.0, help="random pause before each latency job")
    parser.add_argument("--stores", default="sqlite,postgresql,redis")
    args = parser.parse_args()
    stores = args.stores.split(",")
    if "redis" in stores:
        try:
            import store.redis.store  # noqa: F401
        except ImportError as exc:
            print(f"# redis skipped: store.redis does not import ({exc})")
            stores.remove("redis")
    print(f"# no-op jobs, thread pool, --concurrency {args.concurrency}; throughput over {args.jobs} jobs")
    print(f"# latency: {args.latency_jobs} jobs one at a time, random 0-{args.gap_ms:g} ms pause before each")
    print(f"# {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs")
    print(
        f"{'store':<11} {'procs':>5} {'jobs/s':>8} {'wall s':>7} {'RSS MB':>7}   "
        f"{'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for kind in stores:
            for procs in (int(p) for p in args.processes.split(",")):
                url, cleanup = fresh_url(kind, Path(tmp))
                try:
                    res = throughput(url, args.jobs, procs, args.concurrency)
                finally:
                    if cleanup:
                        cleanup()
                rss = max(res.peak_rss_mb)
                print(f"{kind:<11} {procs:>5} {res.rate:>8,.0f} {res.wall_s:>7.1f} {rss:>7.1f}", flush=True)
            url, cleanup = fresh_url(kind, Path(tmp))
            try:
                ms = latency(url, args.latency_jobs, args.concurrency, args.gap_ms)
            finally:
                if cleanup:
                    cleanup()
            p50, p99 = pct(ms, 50), pct(ms, 99)
            print(f"{kind:<11} {'idle':>5} {'':>8} {'':>7} {'':>7}   {p50:>7.1f} {p99:>7.1f} {max(ms):>7.1f}")


if __name__ == "__main__":
    main()
