"""Flow control figures on every store: a drain of a queue with
``concurrency=8``, a drain under a rate of 1,000 starts a second (the measured
start rate against the limit), and a batch of 10,000 jobs with a callback
(seconds from the last job's ack to the callback's start, p50 over runs).

    .venv/bin/python -m bench.flow_control [--stores sqlite,postgresql,redis] [--runs 3]
        [--jobs 5000] [--rate-jobs 5000] [--batch-jobs 10000] [--workers 2]

Workers are ``leasehold worker --queues Q --concurrency 8`` processes running
the no-op handler of tests.handlers (not ``--burst``: a rate-held claim comes
back empty while jobs wait), stopped with SIGTERM once every job is done.
Times are the store's clock (``started_at``, ``completed_at``). On Redis a
batch is one function call (store/redis/batches.py): ``create_s`` is how long
that call blocks the server.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.stores import FreshStores
from bench.worker_throughput import REPO, WORKER, all_jobs, worker_env
from store import open_store
from store.base import JobStore
from store.flow_rules import QueueLimits, Rate
from store.models import JobSpec


def start(url: str, queue: str, n: int, concurrency: int = 8) -> list[subprocess.Popen[bytes]]:
    cmd = [*WORKER, "--queues", queue, "--concurrency", str(concurrency)]
    return [
        subprocess.Popen(
            [*cmd, "--name", f"bench-{queue}-{i}"],
            cwd=REPO,
            env=worker_env(url),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i in range(n)
    ]


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def wait_done(store: JobStore, total: int, timeout_s: float, sample=None) -> None:
    deadline = time.monotonic() + timeout_s
    while store.counts().by_status.get("Completed", 0) < total:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{store.counts().by_status} after {timeout_s:.0f} s")
        if sample:
            sample()
        time.sleep(0.05)


def drain_limited(url: str, jobs: int, workers: int) -> dict[str, float]:
    store = open_store(url)
    store.set_queue_limits("lim", QueueLimits(concurrency=8))
    store.enqueue_many([JobSpec("noop", {"n": i}, queue="lim") for i in range(jobs)])
    peak = [0]
    procs = start(url, "lim", workers)
    try:
        wait_done(
            store, jobs, 600, lambda: peak.__setitem__(0, max(peak[0], store.limit_usage("lim").running))
        )
    finally:
        stop(procs)
    done = list(all_jobs(store))
    first = min(j.started_at.timestamp() for j in done)
    last = max(j.completed_at.timestamp() for j in done)
    store.close()
    return {"jobs_per_s": jobs / (last - first), "peak_running_sampled": peak[0]}


def drain_rated(url: str, jobs: int, workers: int, rate: int) -> dict[str, float]:
    store = open_store(url)
    store.set_queue_limits("rated", QueueLimits(rate=Rate(rate, 1.0)))
    store.enqueue_many([JobSpec("noop", {"n": i}, queue="rated") for i in range(jobs)])
    procs = start(url, "rated", workers)
    try:
        wait_done(store, jobs, 600)
    finally:
        stop(procs)
    starts = sorted(j.started_at.timestamp() for j in all_jobs(store))
    store.close()
    # The first window starts ``rate`` jobs at once; the rate is measured over
    # the starts that followed it: (n - rate) starts in (last - first window) s.
    span = starts[-1] - starts[0]
    return {"measured_per_s": (len(starts) - rate) / span if span else float("nan"), "limit_per_s": rate}


def batch_callback(url: str, jobs: int, workers: int) -> dict[str, float]:
    store = open_store(url)
    t0 = time.perf_counter()
    batch = store.create_batch(
        [JobSpec("noop", {"n": i}, queue="b") for i in range(jobs)],
        JobSpec("noop", {"callback": True}, queue="b"),
    )
    created_s = time.perf_counter() - t0
    procs = start(url, "b", workers)
    try:
        wait_done(store, jobs + 1, 900)
    finally:
        stop(procs)
    callback = store.get(batch.callback_job_id)
    last_ack = max(j.completed_at.timestamp() for j in store.batch_jobs(batch.id, jobs))
    store.close()
    return {"ack_to_callback_ms": (callback.started_at.timestamp() - last_ack) * 1000, "create_s": created_s}


def claim_cost(url: str, jobs: int) -> dict[str, float]:
    """One process: claim 8 then ack them, until ``jobs`` are done, on a plain
    queue and on one with a concurrency and a rate limit that never hold
    (what the limited claim's bookkeeping costs); µs per job, and the ratio."""
    store = open_store(url)
    store.set_queue_limits("lim", QueueLimits(concurrency=100_000, rate=Rate(1_000_000, 1.0)))
    out = {}
    for queue in ("plain", "lim"):
        store.enqueue_many([JobSpec("noop", None, queue=queue) for _ in range(jobs)])
        t0 = time.perf_counter()
        while batch := store.claim("bench", [queue], 8):
            store.complete_many([(j.id, j.lease_token, None) for j in batch], "bench", return_jobs=False)
        out[f"{queue}_us_per_job"] = (time.perf_counter() - t0) / jobs * 1e6
    out["limited_over_plain"] = out["lim_us_per_job"] / out["plain_us_per_job"]
    store.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stores", default="sqlite,postgresql,redis")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--rate-jobs", type=int, default=5000)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--batch-jobs", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cost-jobs", type=int, default=4000)
    args = ap.parse_args()
    print(
        f"# flow control, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.1f}, Python {platform.python_version()}, "
        f"{args.workers} workers x 8 slots, {args.runs} runs"
    )
    stores = FreshStores(Path(tempfile.mkdtemp(prefix="bench-flow-")))
    try:
        for kind in args.stores.split(","):
            results: dict[str, list[float]] = {}
            for _ in range(args.runs):
                for name, fn in (
                    ("claim+ack cost", lambda u: claim_cost(u, args.cost_jobs)),
                    ("drain concurrency=8", lambda u: drain_limited(u, args.jobs, args.workers)),
                    (
                        f"drain rate={args.rate}/s",
                        lambda u: drain_rated(u, args.rate_jobs, args.workers, args.rate),
                    ),
                    (
                        f"batch {args.batch_jobs} + callback",
                        lambda u: batch_callback(u, args.batch_jobs, args.workers),
                    ),
                ):
                    with stores.fresh(kind) as url:
                        for key, value in fn(url).items():
                            results.setdefault(f"{name}: {key}", []).append(value)
                        print(f"  {kind} {name} done", file=sys.stderr)
            for key, values in results.items():
                print(
                    f"{kind:10} {key:45} median {statistics.median(values):10.2f}  "
                    f"min {min(values):10.2f}  max {max(values):10.2f}"
                )
    finally:
        stores.close()


if __name__ == "__main__":
    main()
