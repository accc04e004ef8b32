"""Claim + complete throughput of the stores, with 1 and 4 processes.

Each process loops ``claim(batch)`` then ``complete`` per job until the queue
is empty; the figure is jobs completed per second of wall time, from the first
claim to the last ack. Every job is checked Completed afterwards.

    .venv/bin/python -m bench.store_throughput [--jobs 20000] [--batch 50] [--stores sqlite,postgresql,redis]

PostgreSQL and Redis come from LEASEHOLD_TEST_PG_URL / LEASEHOLD_TEST_REDIS_URL
(defaults: the local servers); the benchmark creates its own database / key
prefix and removes it afterwards.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import resource
import statistics
import tempfile
import time
from pathlib import Path

from store import StoreSettings, open_store
from tests.backends import PgTemplate, SqliteTemplate, delete_redis_prefix, redis_url_with_prefix


def drain(url: str, worker: str, batch: int, barrier, out) -> None:
    store = open_store(url, StoreSettings())
    barrier.wait()
    t0 = time.perf_counter()
    done, empty = 0, 0
    while empty < 3:
        jobs = store.claim(worker, ["default"], batch)
        if not jobs:
            empty += 1
            continue
        empty = 0
        for job in jobs:
            store.complete(job.id, job.lease_token, None, worker_id=worker)
        done += len(jobs)
    out.put((done, t0, time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
    store.close()


def run_once(url: str, jobs: int, procs: int, batch: int) -> tuple[float, float]:
    store = open_store(url, StoreSettings())
    store.enqueue_many([("noop", None)] * jobs)
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(procs), ctx.Queue()
    children = [ctx.Process(target=drain, args=(url, f"w{i}", batch, barrier, out)) for i in range(procs)]
    for c in children:
        c.start()
    results = [out.get(timeout=600) for _ in children]
    for c in children:
        c.join()
    done = sum(r[0] for r in results)
    counts = store.counts().by_status
    assert done == jobs and counts["Completed"] == jobs and counts["Queued"] == 0, (done, counts)
    store.close()
    start, end = min(r[1] for r in results), max(r[2] for r in results)
    return jobs / (end - start), max(r[3] for r in results) / 1024


def fresh_url(kind: str, tmp: Path) -> tuple[str, object]:
    if kind == "sqlite":
        folder = Path(tempfile.mkdtemp(dir=tmp))
        return SqliteTemplate(folder).clone(folder), None
    if kind == "postgresql":
        template = PgTemplate()
        return template.url_for(template.name), template.drop
    url, prefix = redis_url_with_prefix()
    return url, lambda: delete_redis_prefix(url, prefix)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--procs", default="1,4")
    args = parser.parse_args()
    print(f"# claim+complete, no-op jobs; {args.jobs} jobs, claim batch {args.batch}, {args.runs} runs")
    print(f"# {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs")
    print(f"{'store':<11} {'procs':>5} {'jobs/s median':>14} {'min-max':>17} {'peak RSS MB':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.stores.split(","):
            for procs in (int(p) for p in args.procs.split(",")):
                rates, rss = [], 0.0
                for _ in range(args.runs):
                    url, cleanup = fresh_url(kind, Path(tmp))
                    try:
                        rate, peak = run_once(url, args.jobs, procs, args.batch)
                    finally:
                        if cleanup:
                            cleanup()
                    rates.append(rate)
                    rss = max(rss, peak)
                lo, hi = min(rates), max(rates)
                median = statistics.median(rates)
                print(f"{kind:<11} {procs:>5} {median:>14,.0f} {lo:>8,.0f}-{hi:<8,.0f} {rss:>12.1f}")


if __name__ == "__main__":
    main()
