"""Record keeping per call: the latency of the record operations workers,
the console and maintenance run most (docs/architecture.md, "Stores"), on
each store, through the public JobStore methods only (so the same file
measures any release).

    .venv/bin/python -m bench.record_ops [--stores sqlite,postgresql,redis] [--calls 300]

Each operation is called ``--calls`` times on a fresh store (after 20 calls
of warm-up); the figure is the median and p90 in microseconds: renewing a
held lock (``acquire_lock`` by its owner, once a batch of retention),
``lock_info``, a worker's registry heartbeat, ``workers()`` with 20
registered, counting a login failure, saving a bulk operation's progress,
appending a maintenance run (100 kept).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from bench.stores import KINDS, FreshStores, server_versions
from store import open_store
from store.base import JobStore
from store.models import BulkOperation, MaintenanceRun, WorkerInfo

WARMUP = 20


def timed(fn: Callable[[int], object], calls: int) -> tuple[float, float]:
    """(median, p90) of ``calls`` calls of ``fn(i)``, microseconds."""
    for i in range(WARMUP):
        fn(i)
    took = []
    for i in range(calls):
        t0 = time.perf_counter()
        fn(i)
        took.append((time.perf_counter() - t0) * 1e6)
    took.sort()
    return statistics.median(took), took[int(len(took) * 0.9)]


def operations(store: JobStore) -> dict[str, Callable[[int], object]]:
    now = datetime.now(UTC)
    for w in range(20):
        store.worker_heartbeat(WorkerInfo(f"w-{w}", "host", w, ["default"], 4), register=True)
    store.acquire_lock("bench", "me", 60)
    op = BulkOperation("op-bench", "cancel", {"queue": "q"}, "operator:bench", 1000, state="running")
    store.save_operation(op)

    def save(i: int) -> object:
        return store.save_operation(dataclasses.replace(op, changed=i))

    def run(i: int) -> object:
        r = MaintenanceRun(str(uuid.uuid4()), "retention", now, now, "me", i, 1.0, 1.0)
        return store.record_maintenance_run(r)

    return {
        "lock renew": lambda i: store.acquire_lock("bench", "me", 60),
        "lock_info": lambda i: store.lock_info("bench"),
        "worker heartbeat": lambda i: store.worker_heartbeat(
            WorkerInfo("w-0", "host", 0, ["default"], 4, jobs_in_hand=[str(i)])
        ),
        "workers (20)": lambda i: store.workers(),
        "record_failure": lambda i: store.record_failure(f"user|{i % 50}", 600),
        "save_operation": save,
        "maintenance run": run,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stores", default=",".join(KINDS))
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    kinds = [k for k in args.stores.split(",") if k]
    print(f"# servers: {server_versions(kinds)}")
    print(f"# {args.calls} calls an operation after {WARMUP} of warm-up; median / p90 (µs)")
    with tempfile.TemporaryDirectory() as tmp:
        stores = FreshStores(Path(tmp))
        try:
            for kind in kinds:
                with stores.fresh(kind) as url:
                    store = open_store(url)
                    try:
                        for name, fn in operations(store).items():
                            median, p90 = timed(fn, args.calls)
                            print(f"| {kind} | {name} | {median:,.0f} | {p90:,.0f} |", flush=True)
                    finally:
                        store.close()
        finally:
            stores.close()


if __name__ == "__main__":
    main()
