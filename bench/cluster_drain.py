"""A drain on a 3-master Redis Cluster: the namespace on one master (no
``shards``) against the namespace split over the three (``shards=3``), and the
Redis CPU a job costs on each master.

For each layout: a throwaway 3-master cluster (tests/redis_cluster.py, loopback
ports, no persistence) gets ``--jobs`` no-op jobs spread evenly over three
queues (``enqueue_many``), then ``--workers`` ``leasehold worker --burst``
processes serving the three queues drain them. Every job is checked Completed
by the holder of its lease (bench.worker_throughput ``check_ran``). Measured:

- rate: jobs a second from the first claim to the last completion (store clock);
- Redis CPU a job on each master: the growth of ``used_cpu_user +
  used_cpu_sys`` (``INFO cpu``) over the enqueue and the drain, divided by the
  jobs, in microseconds; its share of the three masters' sum;
- the ceiling of one master: 1 / (CPU seconds a job on the busiest master), in
  jobs a second, and the projection for N masters (N x the ceiling of a
  master with an even share; the measured shares say how even they are).

The clients (workers, enqueue) share the machine with the servers, so the
rate is bound by the clients on a small machine; the CPU a job is the
figure to read.

    .venv/bin/python -m bench.cluster_drain [--jobs 6000] [--workers 2] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import platform
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import redis

from bench.worker_throughput import check_ran, start_worker, wait_workers
from store import StoreSettings, open_store
from store.models import JobSpec
from store.redis.keys import DEFAULT_PREFIX
from tests.redis_cluster import Cluster, available

QUEUES = ("shard-a", "shard-b", "shard-c")  # one on each of 3 shards (CRC-32 of the name)


def cpu_s(port: int) -> float:
    """Seconds of CPU the server on ``port`` has used (user + system)."""
    info = redis.Redis(host="127.0.0.1", port=port).info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


@dataclass(frozen=True)
class Layout:
    """One run: ``rate`` jobs/s; ``cpu_us`` the Redis CPU a job on each master, µs."""

    name: str
    rate: float
    cpu_us: list[float]

    @property
    def shares(self) -> list[float]:
        total = sum(self.cpu_us) or 1.0
        return [c / total for c in self.cpu_us]

    @property
    def ceiling(self) -> float:
        """Jobs a second the busiest master could serve at 100 % of one core."""
        return 1e6 / max(self.cpu_us)


def drain(cluster: Cluster, query: str, jobs: int, workers: int, concurrency: int) -> Layout:
    # The default prefix: its tags {leasehold:0..2} fall one on each master of an
    # evenly split cluster (docs/architecture.md, Shards); a random one may not.
    prefix = DEFAULT_PREFIX
    url = f"redis+cluster://127.0.0.1:{cluster.ports[0]}?prefix={prefix}{query}"
    store = open_store(url, StoreSettings())
    try:
        before = [cpu_s(p) for p in cluster.ports]
        specs = [JobSpec(name="noop", queue=QUEUES[i % len(QUEUES)]) for i in range(jobs)]
        ids = [job.id for job in store.enqueue_many(specs)]
        with tempfile.TemporaryFile() as log:
            procs = [
                start_worker(url, f"bench-{i}", concurrency, True, log, queues=",".join(QUEUES))
                for i in range(workers)
            ]
            exits = wait_workers(procs, 1800)
            if any(code != 0 for code, _ in exits):
                log.seek(0)
                codes = [c for c, _ in exits]
                raise RuntimeError(f"worker exit codes {codes}: {log.read().decode()[-2000:]}")
        after = [cpu_s(p) for p in cluster.ports]
        first, last = check_ran(store, ids)
        cpu = [(b - a) / jobs * 1e6 for a, b in zip(before, after, strict=True)]
        return Layout(query.lstrip("&") or "unsharded", jobs / (last - first), cpu)
    finally:
        store.close()
        cluster.delete_prefix(prefix)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=6000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--shards", type=int, default=3)
    args = parser.parse_args()
    if not available():
        sys.exit("redis-server and redis-cli are needed (apt-get install redis-server)")
    print("# drain on a 3-master Redis Cluster, unsharded against shards (bench/cluster_drain.py)")
    print(
        f"# jobs {args.jobs} no-op over queues {', '.join(QUEUES)}; {args.workers} burst workers "
        f"--concurrency {args.concurrency}; python {platform.python_version()}; "
        f"{shutil.which('redis-server')}"
    )
    folder = Path(tempfile.mkdtemp(prefix="lh-cluster-bench-"))
    cluster = Cluster(folder)
    try:
        runs = [drain(cluster, "", args.jobs, args.workers, args.concurrency)]
        try:
            runs.append(drain(cluster, f"&shards={args.shards}", args.jobs, args.workers, args.concurrency))
        except Exception as exc:  # a store without shards: say so, keep the baseline
            print(f"# shards={args.shards}: not run: {type(exc).__name__}: {str(exc)[:300]}")
    finally:
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)
    print("| layout | jobs/s | Redis CPU µs/job on each master | share | busiest master's ceiling, jobs/s |")
    print("|---|---:|---|---|---:|")
    for run in runs:
        cpu = " / ".join(f"{c:.1f}" for c in run.cpu_us)
        share = " / ".join(f"{s:.0%}" for s in run.shares)
        print(f"| {run.name} | {run.rate:,.0f} | {cpu} | {share} | {run.ceiling:,.0f} |")
    base = runs[0]
    per_job = sum(base.cpu_us)
    print(f"# one master: {1e6 / per_job:,.0f} jobs/s at one core ({per_job:.1f} µs a job)")
    if len(runs) > 1:
        sharded = runs[1]
        total = sum(sharded.cpu_us)
        print(
            f"# {args.shards} masters sharded: {sharded.ceiling:,.0f} jobs/s (busiest master at one core); "
            f"{total / per_job:.2f}x the Redis CPU a job of one master; projected N masters: "
            f"N x {1e6 / total:,.0f} jobs/s with even shares"
        )


if __name__ == "__main__":
    main()
