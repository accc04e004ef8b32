"""Worker throughput and end-to-end latency with real worker processes.

Throughput: N no-op jobs enqueued with ``enqueue_many``, then 1 and then 2
``flask --app wsgi worker --burst`` processes drain them; the rate is jobs
per second from the first claim to the last completion (store timestamps,
so interpreter start-up is left out; the wall time with start-up is shown
too). Every job is checked Completed.

Latency: one idle worker; jobs are enqueued one at a time, each after the
previous one completed plus a random pause (so the worker is found at every
stage of its idle backoff, 5 ms -> 200 ms); latency is ``completed_at -
created_at`` on the store's clock. p50/p99 in milliseconds.

    .venv/bin/python bench/worker_throughput.py [--jobs 20000] [--concurrency 8]
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
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.store_throughput import fresh_url  # noqa: E402
from store import JobStore, StoreSettings, open_store  # noqa: E402
from store.models import Job  # noqa: E402

FLASK = str(Path(sys.executable).parent / "flask")


def worker_env(url: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LEASEHOLD_") or k.startswith("LEASEHOLD_TEST")
    }
    env.update(
        LEASEHOLD_STORE_URL=url,
        LEASEHOLD_HANDLERS="tests.handlers",
        LEASEHOLD_SECRET_KEY="bench",
        LEASEHOLD_RECOVERY_INTERVAL="5",
        PYTHONPATH=str(REPO),
    )
    return env


def start_worker(url: str, name: str, concurrency: int, burst: bool) -> subprocess.Popen[bytes]:
    cmd = [FLASK, "--app", "wsgi", "worker", "--concurrency", str(concurrency), "--name", name]
    if burst:
        cmd.append("--burst")
    return subprocess.Popen(
        cmd, cwd=REPO, env=worker_env(url), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def all_jobs(store: JobStore) -> Iterator[Job]:
    cursor = None
    while True:
        page = store.list_jobs(limit=500, cursor=cursor)
        yield from page.items
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def throughput(url: str, jobs: int, procs: int, concurrency: int) -> tuple[float, float]:
    """(jobs/s first claim -> last completion, wall seconds including start-up)."""
    store = open_store(url, StoreSettings())
    try:
        store.enqueue_many([("noop", None)] * jobs)
        t0 = time.perf_counter()
        workers = [start_worker(url, f"bench-{i}", concurrency, burst=True) for i in range(procs)]
        for w in workers:
            _, err = w.communicate(timeout=1800)
            if w.returncode != 0:
                raise SystemExit(f"worker exited with {w.returncode}: {err.decode()[-2000:]}")
        wall = time.perf_counter() - t0
        counts = store.counts().by_status
        assert counts["Completed"] == jobs, counts
        started = min(j.started_at for j in all_jobs(store))
        finished = max(j.completed_at for j in all_jobs(store))
        return jobs / (finished - started).total_seconds(), wall
    finally:
        store.close()


def latency(url: str, jobs: int, concurrency: int, gap_ms: float) -> list[float]:
    """Milliseconds from enqueue to completion (store clock), one job at a time."""
    store = open_store(url, StoreSettings())
    worker = start_worker(url, "bench-idle", concurrency, burst=False)
    rng = random.Random(1)
    out: list[float] = []
    try:
        warm = store.enqueue("noop")
        while store.get(warm.id).status.name != "Completed":  # wait until the worker is up
            time.sleep(0.05)
        for _ in range(jobs):
            time.sleep(rng.uniform(0, gap_ms / 1000))
            job = store.enqueue("noop")
            while (done := store.get(job.id)).status.name != "Completed":
                time.sleep(0.002)
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
        f"{'store':<11} {'procs':>5} {'jobs/s':>8} {'wall s':>7}   {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for kind in stores:
            for procs in (int(p) for p in args.processes.split(",")):
                url, cleanup = fresh_url(kind, Path(tmp))
                try:
                    rate, wall = throughput(url, args.jobs, procs, args.concurrency)
                finally:
                    if cleanup:
                        cleanup()
                print(f"{kind:<11} {procs:>5} {rate:>8,.0f} {wall:>7.1f}", flush=True)
            url, cleanup = fresh_url(kind, Path(tmp))
            try:
                ms = latency(url, args.latency_jobs, args.concurrency, args.gap_ms)
            finally:
                if cleanup:
                    cleanup()
            p50, p99 = pct(ms, 50), pct(ms, 99)
            print(f"{kind:<11} {'idle':>5} {'':>8} {'':>7}   {p50:>7.1f} {p99:>7.1f} {max(ms):>7.1f}")


if __name__ == "__main__":
    main()
