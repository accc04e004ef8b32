"""Retention at scale: prune 100,000 finished jobs on each store,
and the drain with pause checks and unique keys in place.

    .venv/bin/python -m bench.retention [--stores sqlite,postgresql,redis]
        [--jobs 100000] [--drain-jobs 5000] [--concurrency 8]

Pruning: ``--jobs`` Completed jobs are loaded (``bench/scale.py``), the store's
clock is moved a day on, and ``store.maintenance.run_retention`` prunes them
under its lock in adaptive batches (``BATCH_TARGET_MS``); the figures are the
run's own record: jobs pruned, seconds, jobs/s and the longest batch (ms),
the time one batch held the store. Checked: the store counts no Completed
job afterwards.

Drain with the operating features on: ``--drain-jobs`` no-op jobs drained by
one worker process (``bench/worker_throughput.throughput``), once plain and
once with every job enqueued as a unique job (``unique_key``) and one queue
of the store paused (so every claim reads the paused set). The ratio of the
two is the cost of those features; the issue allows 5%.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench.scale import load_finished
from bench.stores import KINDS, FreshStores, server_versions
from bench.worker_throughput import check_ran, start_worker, wait_workers
from store import open_store
from store.lifecycle import JobStatus
from store.maintenance import run_retention
from store.models import JobSpec


def prune(stores: FreshStores, kind: str, jobs: int) -> dict[str, float]:
    """Load ``jobs`` Completed jobs, age them a day, prune them; the run's figures."""
    with stores.fresh(kind) as url:
        store = open_store(url)
        try:
            load_finished(store, jobs, progress=False)
            store.clock_offset_s += 86400
            run = run_retention(store, {JobStatus.Completed: 3600.0}, "bench")
            assert run is not None
            assert store.counts().by_status["Completed"] == 0, "jobs left after the run"
            return {
                "pruned": run.count,
                "seconds": run.duration_ms / 1000,
                "jobs_per_s": run.count / (run.duration_ms / 1000),
                "longest_batch_ms": run.longest_batch_ms,
            }
        finally:
            store.close()


def drain(stores: FreshStores, kind: str, jobs: int, concurrency: int, features: bool) -> float:
    """Jobs/s of one burst worker process draining ``jobs`` no-op jobs (first
    claim to last completion, store clock); with ``features`` every job is a
    unique job and another queue is paused."""
    with stores.fresh(kind) as url:
        store = open_store(url)
        try:
            if features:
                store.pause_queue("paused-elsewhere", actor="operator:bench")
                specs = [JobSpec("noop", None, unique_key=f"bench:{i}") for i in range(jobs)]
            else:
                specs = [JobSpec("noop", None) for _ in range(jobs)]
            ids = [job.id for job in store.enqueue_many(specs)]
            with tempfile.TemporaryFile() as log:
                exits = wait_workers([start_worker(url, "bench-0", concurrency, True, log)], 1800)
                if any(code != 0 for code, _ in exits):
                    log.seek(0)
                    raise RuntimeError(f"worker failed: {log.read().decode()[-2000:]}")
            first, last = check_ran(store, ids)
            return jobs / (last - first)
        finally:
            store.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stores", default=",".join(KINDS))
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--drain-jobs", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    kinds = [k for k in args.stores.split(",") if k]
    print(f"# servers: {server_versions(kinds)}")
    print(f"# pruning {args.jobs:,} Completed jobs a day old")
    print(f"# drain {args.drain_jobs:,} no-op jobs, 1 worker x{args.concurrency}, plain and unique+pause")
    print(
        "| store | pruned | seconds | jobs/s | longest batch (ms) "
        "| drain plain (jobs/s) | drain unique+pause (jobs/s) | ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        stores = FreshStores(Path(tmp))
        try:
            for kind in kinds:
                p = prune(stores, kind, args.jobs)
                plain = drain(stores, kind, args.drain_jobs, args.concurrency, features=False)
                featured = drain(stores, kind, args.drain_jobs, args.concurrency, features=True)
                row = [f"{p['pruned']:,.0f}", f"{p['seconds']:.1f}", f"{p['jobs_per_s']:,.0f}"]
                row += [f"{p['longest_batch_ms']:.1f}", f"{plain:,.0f}", f"{featured:,.0f}"]
                print(f"| {kind} | {' | '.join(row)} | {featured / plain:.2f} |", flush=True)
        finally:
            stores.close()


if __name__ == "__main__":
    main()
