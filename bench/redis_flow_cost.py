"""Redis server instructions a job of the Redis store's claim and ack, on a
plain queue and on one with a concurrency and a rate limit that never hold
(what the limited claim's bookkeeping costs), and of a single enqueue.

    .venv/bin/python -m bench.redis_flow_cost [--jobs 2000] [--batch 8]

One redis-server of its own under ``valgrind --tool=callgrind``
(bench/peers/cost.py ``start_server``); one process, no workers, so the count
is the commands' own (plus the server's timers while they run): each figure
is the instructions between two ``callgrind_control --dump`` calls
(bench/peers/instructions.py) divided by the jobs. Claims take ``--batch``
jobs, acks are one ``complete_many`` a batch (a worker's recorder).
On a store without flow control the limited figure is left out, so the same
command measures a release before it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.peers.cost import start_server
from bench.peers.instructions import per_job
from store import open_store
from store.models import JobSpec


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=2000)
    p.add_argument("--batch", type=int, default=8)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="lh-flow-cost-") as tmp:
        proc, port, out = start_server(Path(tmp))
        os.environ["BENCH_PEERS_CALLGRIND_PID"] = str(proc.pid)
        os.environ["BENCH_PEERS_CALLGRIND_OUT"] = str(out)
        store = open_store(f"redis://127.0.0.1:{port}/0")
        try:
            print(f"# Redis server instructions a job (callgrind), {args.jobs} jobs, claims of {args.batch}")
            for _ in range(5):
                store.enqueue("noop", None, queue="warm")
            results = {
                "single enqueue": per_job(
                    lambda: [store.enqueue("noop") for _ in range(args.jobs)], args.jobs
                )
            }
            queues = ["plain"]
            if getattr(store, "supports_flow", False):
                from store.flow_rules import QueueLimits, Rate

                limits = QueueLimits(concurrency=100_000, rate=Rate(1_000_000, 1.0))
                store.set_queue_limits("limited", limits, actor="operator:bench")
                queues.append("limited")
            for queue in queues:
                store.enqueue_many([JobSpec("noop", None, queue=queue) for _ in range(args.jobs)])

                def drain(queue: str = queue) -> None:
                    while batch := store.claim("bench", [queue], args.batch):
                        store.complete_many(
                            [(j.id, j.lease_token, None) for j in batch], "bench", return_jobs=False
                        )

                results[f"claim+ack, {queue} queue"] = per_job(drain, args.jobs)
            for name, value in results.items():
                print(f"{name:32} {value:8.2f} k instructions a job")
            if "claim+ack, limited queue" in results:
                ratio = results["claim+ack, limited queue"] / results["claim+ack, plain queue"]
                print(f"limited / plain claim+ack: {ratio:.2f}x")
        finally:
            store.close()
            subprocess.run(["redis-cli", "-p", str(port), "shutdown", "nosave"], capture_output=True)
            proc.wait(60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
