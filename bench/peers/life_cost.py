"""Redis server instructions of a Leasehold job's life (enqueue, claim, ack),
one job a call and batched, with the store alone (no worker processes).

    .venv/bin/python -m bench.peers.life_cost [--jobs 300]

Runs a redis-server of its own under ``valgrind --tool=callgrind`` (as
bench/peers/cost.py does) and counts, per job (thousands of instructions,
bench/peers/instructions.py ``per_job``), in a steady state of BACKLOG jobs
waiting and IN_FLIGHT leases held:

* ``single``: ``enqueue`` of one job, ``claim`` of one, ``complete`` of one;
* ``batched``: ``enqueue_many`` of BATCH jobs, then claims of IN_FLIGHT jobs
  and one ``complete_many`` of them (a worker's grouped acks), repeated;
* ``enqueue1`` / ``claim1`` / ``ack1``: the single path's three calls alone;
* ``claim16`` / ``ack16`` / ``bulk100``: the batched path's calls alone
  (one claim of IN_FLIGHT jobs, one complete_many of them, one
  enqueue_many of BATCH jobs);
* ``batched_fused``: the batched path with a worker's fetch-next: each
  ``complete_and_claim`` acks IN_FLIGHT jobs and claims the next IN_FLIGHT
  in one call (lua/complete_claim.lua);
* ``ack_claim1``: one ``complete_and_claim`` of one ack and one claim.

A job here is a plain job (no unique key: unique jobs are enqueued one a
call even in bulk); a paused queue stands beside its queue (every claim
checks the paused set); no progress reports, no heartbeats (bench-cost's
drain has those).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import uuid
from pathlib import Path

from bench.peers.cost import start_server
from bench.peers.instructions import ENQUEUE_BUDGET_K, LIFE_BUDGET_K, per_job
from store import open_store
from store.models import JobSpec

BACKLOG = 1000
IN_FLIGHT = 16
BATCH = 100
QUEUE = "life"


def measure(url: str, jobs: int) -> dict[str, float]:
    out: dict[str, float] = {}
    with open_store(url) as store:
        store.pause_queue("life-paused", actor="operator:bench")
        seq = iter(range(10**9))

        def spec() -> JobSpec:
            return JobSpec("noop", {"seq": next(seq)}, queue=QUEUE)

        store.enqueue_many([spec() for _ in range(BACKLOG)])
        held = store.claim("w", [QUEUE], limit=IN_FLIGHT)

        def single_life() -> None:
            for _ in range(jobs):
                store.enqueue_idempotent(spec())
                [job] = store.claim("w", [QUEUE], limit=1)
                held.append(job)
                done = held.pop(0)
                store.complete(done.id, done.lease_token, None, worker_id="w")

        out["single"] = per_job(single_life, jobs)
        box: dict[str, list] = {}
        out["enqueue1"] = per_job(lambda: [store.enqueue_idempotent(spec()) for _ in range(jobs)], jobs)
        out["claim1"] = per_job(
            lambda: box.update(j=[store.claim("w", [QUEUE])[0] for _ in range(jobs)]), jobs
        )
        out["ack1"] = per_job(
            lambda: [store.complete(j.id, j.lease_token, None, worker_id="w") for j in box["j"]], jobs
        )

        def batched_life() -> None:
            for _ in range(jobs // BATCH):
                store.enqueue_many([spec() for _ in range(BATCH)])
                for _ in range(BATCH // IN_FLIGHT + 1):
                    claimed = store.claim("w", [QUEUE], limit=IN_FLIGHT)
                    store.complete_many([(j.id, j.lease_token, None) for j in held], worker_id="w",
                                        return_jobs=False)  # fmt: skip
                    held[:] = claimed

        out["batched"] = per_job(batched_life, jobs)

        def fused_life() -> None:  # the worker's path with fetch-next: acks and the next claim in one call
            for _ in range(jobs // BATCH):
                store.enqueue_many([spec() for _ in range(BATCH)])
                for _ in range(BATCH // IN_FLIGHT + 1):
                    acks = [(j.id, j.lease_token, None) for j in held]
                    _, held[:] = store.complete_and_claim(acks, "w", [[QUEUE]], IN_FLIGHT)

        out["batched_fused"] = per_job(fused_life, jobs)

        def fused_one() -> None:
            for _ in range(jobs):
                done = held.pop(0)
                _, got = store.complete_and_claim([(done.id, done.lease_token, None)], "w", [[QUEUE]], 1)
                held.extend(got)

        store.enqueue_many([spec() for _ in range(jobs)])
        out["ack_claim1"] = per_job(fused_one, jobs)
        store.enqueue_many([spec() for _ in range(BATCH)])
        box["c"] = []
        out["claim16"] = per_job(
            lambda: box["c"].extend(store.claim("w", [QUEUE], limit=IN_FLIGHT)), IN_FLIGHT
        )
        acks = [(j.id, j.lease_token, None) for j in box["c"]]
        out["ack16"] = per_job(lambda: store.complete_many(acks, worker_id="w", return_jobs=False), IN_FLIGHT)
        out["bulk100"] = per_job(lambda: store.enqueue_many([spec() for _ in range(BATCH)]), BATCH)
    return out


#: The budgets of a job's life, k a job: (what, the path measured, most allowed).
BUDGETS = (
    ("one enqueue call for one job (enqueue1)", "enqueue1", ENQUEUE_BUDGET_K),
    ("a job's life on the batched path (batched)", "batched", LIFE_BUDGET_K),
    (
        "a job's life on the batched path, acks fetching the next jobs (batched_fused)",
        "batched_fused",
        LIFE_BUDGET_K,
    ),
    ("one ack that claims the next job (ack_claim1)", "ack_claim1", LIFE_BUDGET_K),
)


def report(got: dict[str, float]) -> list[str]:
    """The table of ``measure``'s figures, then one line per budget of BUDGETS:
    the figure and whether it is met."""
    lines = ["| path | k instructions / job |", "|---|---:|"]
    lines += [f"| {name} | {value:,.1f} |" for name, value in got.items()]
    for what, path, most in BUDGETS:
        value = got[path]
        lines.append(
            f"# budget: {what} <= {most:,.0f}k: {value:,.1f}k, {'met' if value <= most else 'NOT met'}"
        )
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=300)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="lh-life-") as tmp:
        proc, port, out = start_server(Path(tmp))
        os.environ["BENCH_PEERS_CALLGRIND_PID"] = str(proc.pid)
        os.environ["BENCH_PEERS_CALLGRIND_OUT"] = str(out)
        try:
            url = f"redis://127.0.0.1:{port}/0?prefix=life-{uuid.uuid4().hex[:8]}"
            got = measure(url, args.jobs)
        finally:
            import subprocess

            subprocess.run(["redis-cli", "-p", str(port), "shutdown", "nosave"], capture_output=True)
            proc.wait(60)
    print("\n".join(report(got)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
