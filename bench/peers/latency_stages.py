"""Where a job's latency goes on Redis, stage by stage, with idle workers:
the same jobs and workers as bench/peers/run.py's latency (``bench_stamp``,
``leasehold worker --processes 2 --concurrency 8``), each job timed at four
points on one machine's clock (Redis ``TIME`` and ``time.time()`` read the
same clock here):

- ``t0`` before the enqueue call, ``t_enq`` when it returns;
- ``started_at``: the lease, by the store's clock (inside the enqueue call
  when it hands the job over to an idle worker, else in the worker's claim);
- ``t1``: the handler's first line (``common.stamp_body``).

Stages (ms, p50 and p99): the enqueue call (``t_enq - t0``), lease after the
call's start (``started_at - t0``), and from the call's return to the handler
(``t1 - t_enq``: the waiting worker's wake, the job's decoding, the hand-off
to a slot, the handler's call).

    .venv/bin/python -m bench.peers.latency_stages [--jobs 200] [--gap-ms 100]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from bench.peers import common
from bench.peers.leasehold import Leasehold


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--gap-ms", type=float, default=100.0)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {"enqueue call": [], "lease after t0": [], "return to handler": []}
    total: list[float] = []
    rng = random.Random(1)
    with Leasehold("redis", features=False) as system:
        conn = common.task_conn()
        with common.Workers(system, Leasehold.DEFAULT):
            for seq in range(-common.WARMUP, args.jobs):
                time.sleep(rng.uniform(0, args.gap_ms / 1000))
                t0 = time.time()
                job = system.store.enqueue("bench_stamp", {"seq": seq})
                t_enq = time.time()
                got = conn.blpop([common.TIMES], timeout=60)
                assert got is not None, f"job {seq} did not run"
                got_seq, t1 = got[1].decode().split()
                assert int(got_seq) == seq
                if seq < 0:
                    continue
                started = system.store.get(job.id).started_at
                assert started is not None
                rows["enqueue call"].append((t_enq - t0) * 1000)
                rows["lease after t0"].append((started.timestamp() - t0) * 1000)
                rows["return to handler"].append((float(t1) - t_enq) * 1000)
                total.append((float(t1) - t0) * 1000)
    print(f"# Leasehold-Redis latency by stage: {args.jobs} jobs 0-{args.gap_ms:g} ms apart, idle workers "
          f"({Leasehold('redis').describe(Leasehold.DEFAULT)}); ms")  # fmt: skip
    print("| stage | p50 | p99 |")
    print("|---|---:|---:|")
    for name, values in [*rows.items(), ("total (t1 - t0)", total)]:
        print(f"| {name} | {pct(values, 50):.2f} | {pct(values, 99):.2f} |")


if __name__ == "__main__":
    main()
