"""CPU per job of the SQL stores' bookkeeping path, two source trees side by
side: ``enqueue_many`` + ``claim`` + ``complete_many`` of ``--jobs`` jobs on
a fresh store, timed as the CPU the client process used (``time.process_time``:
on SQLite that is all of it) plus, on PostgreSQL, the CPU of the store's
server backends (``/proc/<pid>/stat`` utime + stime of every backend of the
store's database: the server must be local).

    .venv/bin/python -m bench.sql_bookkeeping --before /tmp/leasehold-before [--after .]
        [--stores sqlite,postgresql] [--jobs 5000] [--runs 3]

``--before`` is a checkout of the earlier commit (``git archive <commit> |
tar -x -C DIR``); each run starts one process per tree and store, the trees
alternating in which goes first, and each tree migrates its own fresh store
(``bench.stores``). Prints the medians (µs per job) and the after/before ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Jobs a chunk of enqueue_many, and claimed (then acked) a call: a worker's batch.
ENQUEUE_CHUNK = 500
CLAIM_BATCH = 100
#: Jobs run through before the clock starts (statement caches, pools, the shard).
WARMUP = 300
TICKS = os.sysconf("SC_CLK_TCK")


def _backend_cpu_s(pids: list[int]) -> dict[int, float]:
    """utime + stime of each readable process, seconds."""
    out = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[pid] = (int(fields[11]) + int(fields[12])) / TICKS
    return out


def _backends(store: object) -> list[int]:
    from sqlalchemy import text

    engine = store.read_engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        sql = "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        return [int(p) for (p,) in conn.execute(text(sql))]


def _cycle(store: object, n: int, queue: str) -> None:
    from store.models import JobSpec

    for lo in range(0, n, ENQUEUE_CHUNK):
        store.enqueue_many(
            [JobSpec("t", {"i": i}, queue=queue) for i in range(lo, min(n, lo + ENQUEUE_CHUNK))]
        )  # type: ignore[attr-defined]
    done = 0
    while done < n:
        jobs = store.claim("w-bench", [queue], CLAIM_BATCH)  # type: ignore[attr-defined]
        if not jobs:
            raise RuntimeError(f"claimed {done} of {n}")
        store.complete_many([(j.id, j.lease_token, None) for j in jobs], "w-bench", return_jobs=False)  # type: ignore[attr-defined]
        done += len(jobs)


def child(kind: str, jobs: int) -> dict[str, float]:
    """One measurement in this process's tree: CPU seconds, client and server."""
    from bench.stores import FreshStores
    from store import open_store

    with tempfile.TemporaryDirectory() as tmp:
        stores = FreshStores(Path(tmp))
        try:
            with stores.fresh(kind) as url:
                store = open_store(url)
                try:
                    _cycle(store, WARMUP, "warm")
                    pg = kind == "postgresql"
                    before = _backend_cpu_s(_backends(store)) if pg else {}
                    t0 = time.process_time()
                    _cycle(store, jobs, "bench")
                    client = time.process_time() - t0
                    after = _backend_cpu_s(_backends(store)) if pg else {}
                    server = sum(s - before.get(pid, 0.0) for pid, s in after.items())
                    if pg and not after:
                        server = float("nan")  # the server's processes are not readable here
                finally:
                    store.close()
        finally:
            stores.close()
    return {"client_s": client, "server_s": server}


def run_child(tree: Path, kind: str, jobs: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-m", "bench.sql_bookkeeping", "--child", kind, "--jobs", str(jobs)]
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{tree} {kind}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", type=Path)
    parser.add_argument("--after", type=Path, default=Path.cwd())
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.jobs)))
        return
    if args.before is None:
        parser.error("--before DIR is required")
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    kinds = args.stores.split(",")
    print(f"# bench.sql_bookkeeping {time.strftime('%Y-%m-%d %H:%M')}  cpus={os.cpu_count()}")
    print(f"# jobs={args.jobs} runs={args.runs} enqueue_many chunk={ENQUEUE_CHUNK} claim batch={CLAIM_BATCH}")
    print(f"# before={trees['before']} after={trees['after']} load={os.getloadavg()[0]:.2f}")
    samples: dict[tuple[str, str], list[dict[str, float]]] = {}
    for run in range(args.runs):
        order = ["before", "after"] if run % 2 == 0 else ["after", "before"]
        for kind in kinds:
            for name in order:
                got = run_child(trees[name], kind, args.jobs)
                samples.setdefault((kind, name), []).append(got)
                print(
                    f"  run {run + 1} {kind:<10} {name:<6} "
                    f"client {got['client_s']:.3f} s  server {got['server_s']:.3f} s",
                    file=sys.stderr,
                )

    def per_job(kind: str, name: str, part: str) -> float:
        values = [
            s[part] if part != "total" else s["client_s"] + s["server_s"] for s in samples[(kind, name)]
        ]
        return statistics.median(values) / args.jobs * 1e6

    print(f"{'store':<11} {'part':<7} {'before µs/job':>14} {'after µs/job':>13} {'after/before':>13}")
    for kind in kinds:
        for part in ("client_s", "server_s", "total") if kind == "postgresql" else ("client_s",):
            b, a = per_job(kind, "before", part), per_job(kind, "after", part)
            print(f"{kind:<11} {part.removesuffix('_s'):<7} {b:>14.1f} {a:>13.1f} {a / b:>13.3f}")
    print(f"# load at end={os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
