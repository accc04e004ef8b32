"""What ``ctx.log`` costs a job: an in-process burst worker drains N jobs of
a handler that logs nothing and N of one that logs 10 lines, on each store;
the difference per job, and how many job-log writes (store calls) carried
the lines. ``python -m bench.job_log_cost [--jobs N] [--stores sqlite,postgresql,redis]``."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import workers.job_log_book as book_module
from bench.stores import KINDS, FreshStores
from store import StoreSettings, open_store
from workers.config import WorkerConfig
from workers.handlers import load_handlers
from workers.worker import Worker

HANDLERS = "tests.job_logs_handlers"


def drain(url: str, name: str, jobs: int, concurrency: int) -> float:
    """Seconds a burst worker takes to run ``jobs`` jobs of ``name``."""
    store = open_store(url, StoreSettings(lease_ttl_s=30.0))
    try:
        store.enqueue_many([(name, {"tag": str(n)}) for n in range(jobs)])
        config = WorkerConfig(
            store_url=url, concurrency=concurrency, name="bench-logs", handlers=(HANDLERS,), burst=True
        )
        t0 = time.perf_counter()
        assert Worker(config, store, install_signals=False).run() == 0
        return time.perf_counter() - t0
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--stores", default=",".join(KINDS))
    args = parser.parse_args()
    load_handlers([HANDLERS])
    writes: list[int] = []
    real = book_module.append_logs

    def counted(store, lines, keep):
        writes.append(len(lines))
        real(store, lines, keep)

    book_module.append_logs = counted
    print(
        f"{'store':<11} {'silent ms/job':>13} {'10 lines ms/job':>15} {'cost ms/job':>11}"
        f" {'writes':>7} {'lines/write':>11}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        stores = FreshStores(Path(tmp))
        try:
            for kind in args.stores.split(","):
                with stores.fresh(kind) as url:
                    drain(url, "log-nothing", 200, args.concurrency)  # warm up (connections, caches)
                    writes.clear()
                    silent = drain(url, "log-nothing", args.jobs, args.concurrency)
                    assert writes == [], "a handler that logs nothing made a job-log write"
                with stores.fresh(kind) as url:
                    drain(url, "log-nothing", 200, args.concurrency)
                    loud = drain(url, "log-ten", args.jobs, args.concurrency)
                n = len(writes)
                print(
                    f"{kind:<11} {silent / args.jobs * 1000:>13.3f} {loud / args.jobs * 1000:>15.3f}"
                    f" {(loud - silent) / args.jobs * 1000:>11.3f} {n:>7} {sum(writes) / max(n, 1):>11.1f}"
                )
        finally:
            stores.close()


if __name__ == "__main__":
    main()
