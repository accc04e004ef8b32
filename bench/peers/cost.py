"""Redis server instructions a job, Leasehold side by side with its Redis peers.

    make bench-cost                          # creates bench/.peers-venv, then runs this
    .venv/bin/python -m bench.peers.cost --systems leasehold-redis,huey --jobs 300

The store's CPU is what bounds a Redis drain here (one server thread for all
workers) and half of a single enqueue, and seconds on these machines vary 3x
from day to day. So this runs one redis-server of its own under
``valgrind --tool=callgrind`` (on a free port; valgrind is Debian's package
``valgrind``) and each system against it, one process each, as
bench/peers/run.py does, with the measure ``instructions``
(bench/peers/instructions.py): thousands of server instructions a job for a
single enqueue, a bulk enqueue and a drain, the same count every run for the
same commands. Under callgrind the server runs some 50x slower, so sizes are
small; no figure here is a rate. Leasehold runs with every feature on (a
paused queue, unique keys, progress, as in run.py's drain). Then, on the same
server, bench/peers/life_cost.py's paths of Leasehold's store alone (one job
a call, batched, an ack that claims the next job), so that one run prints
every instruction budget, met or not.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from bench.peers.instructions import ENQUEUE_BUDGET_K, LIFE_BUDGET_K
from bench.peers.run import SYSTEMS, system_command, unavailable, versions

HERE = Path(__file__).resolve().parent

DEFAULT = ["leasehold-redis", "huey", "dramatiq", "rq"]
COLUMNS = ("single", "bulk", "drain")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(folder: Path) -> tuple[subprocess.Popen, int, Path]:
    """redis-server under callgrind; (process, port, --callgrind-out-file)."""
    port = free_port()
    out = folder / "callgrind.out"
    cmd = [
        "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
        shutil.which("redis-server") or "redis-server",
        "--port", str(port), "--save", "", "--appendonly", "no",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    deadline = time.monotonic() + 60
    while True:
        try:
            client.ping()
            return proc, port, out
        except redis.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start under callgrind") from None
            time.sleep(0.2)


def run_one(name: str, spec: dict, port: int, out: Path, pid: int) -> dict:
    args = SYSTEMS[name][2]
    url = f"redis://127.0.0.1:{port}"
    env = dict(
        os.environ,
        BENCH_PEERS_REDIS_URL=f"{url}/13",
        LEASEHOLD_TEST_REDIS_URL=f"{url}/12",
        BENCH_PEERS_CALLGRIND_PID=str(pid),
        BENCH_PEERS_CALLGRIND_OUT=str(out),
    )
    spec = dict(spec, system_args=args)
    argv, cwd, env = system_command(name, spec, env)
    proc = subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=spec["timeout"] * 3 + 300, env=env
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    return {"errors": {"run": (proc.stderr.strip().splitlines() or ["no result"])[-1][:300]}}


#: Leasehold's instruction budgets, k a job: (what, measured as, most allowed).
BUDGETS = (
    ("one enqueue call for one job", ("single",), ENQUEUE_BUDGET_K),
    ("a job's life on the batched path (bulk enqueue + drain)", ("bulk", "drain"), LIFE_BUDGET_K),
)


def budgets(got: dict[str, float]) -> list[str]:
    """One line per budget of BUDGETS: the figure and whether it is met."""
    out = []
    for what, parts, most in BUDGETS:
        if all(p in got for p in parts):
            value = sum(got[p] for p in parts)
            verdict = "met" if value <= most else "NOT met"
            out.append(f"# budget: {what} <= {most:,.0f}k: {value:,.1f}k ({' + '.join(parts)}), {verdict}")
    return out


def measure_life(pid: int, out: Path, port: int, jobs: int) -> dict[str, float]:
    """bench/peers/life_cost.py's paths on this server (a fresh key prefix)."""
    import uuid

    from bench.peers import life_cost

    os.environ["BENCH_PEERS_CALLGRIND_PID"] = str(pid)
    os.environ["BENCH_PEERS_CALLGRIND_OUT"] = str(out)
    return life_cost.measure(f"redis://127.0.0.1:{port}/0?prefix=life-{uuid.uuid4().hex[:8]}", jobs)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--systems", default=",".join(DEFAULT), help=f"of {','.join(SYSTEMS)} (Redis ones)")
    p.add_argument("--single", type=int, default=1000, help="jobs enqueued one at a time")
    p.add_argument("--bulk", type=int, default=1000, help="jobs enqueued in bulk")
    p.add_argument("--jobs", type=int, default=500, help="jobs drained")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds a drain may take")
    p.add_argument("--life-jobs", type=int, default=300, help="jobs of life_cost.py's paths (0: skip them)")
    args = p.parse_args(argv)
    if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        print("valgrind not found: apt-get install valgrind", file=sys.stderr)
        return 2
    names = [n for n in args.systems.split(",") if n]
    spec = {"measures": ["instructions"], "single": args.single, "bulk": args.bulk, "jobs": args.jobs,
            "timeout": args.timeout, "config": None}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="lh-cost-") as tmp:
        proc, port, out = start_server(Path(tmp))
        try:
            version = redis.Redis(port=port).info("server")["redis_version"]
            print("# Redis server instructions a job (callgrind), Leasehold and its peers side by side")
            print(f"# command: {' '.join(['bench/peers/cost.py', *(argv or sys.argv[1:])])}")
            print(f"# server: redis-server {version} under valgrind --tool=callgrind, its own, port {port}")
            print(f"# sizes: single {args.single}, bulk {args.bulk}, drain {args.jobs} no-op jobs; "
                  "each system's default configuration (bench/peers/peer_*.py, leasehold.py)")  # fmt: skip
            print(f"# versions: {versions()}")
            rows = []
            for name in names:
                if why := unavailable(name):
                    print(f"# skipped {name}: {why}")
                    continue
                t0 = time.perf_counter()
                result = run_one(name, spec, port, out, proc.pid)
                print(f"# {name} ({time.perf_counter() - t0:.0f} s): {json.dumps(result)}", flush=True)
                rows.append((name, result))
            life = measure_life(proc.pid, out, port, args.life_jobs) if args.life_jobs else None
        finally:
            subprocess.run(["redis-cli", "-p", str(port), "shutdown", "nosave"], capture_output=True)
            proc.wait(60)
    print()
    print("| system | configuration | " + " | ".join(f"{c} (k instr./job)" for c in COLUMNS) + " |")
    print("|---|---|" + "---:|" * len(COLUMNS))
    for name, result in rows:
        got = result.get("instructions", {})
        cells = [f"{got[c]:,.1f}" if c in got else result.get("errors", {}).get("instructions", "—")[:60]
                 for c in COLUMNS]  # fmt: skip
        print(f"| {name} | {result.get('config', '?')} | " + " | ".join(cells) + " |")
    lh = dict(rows).get("leasehold-redis", {}).get("instructions", {})
    for line in budgets(lh):
        print(line)
    for name, result in rows:
        got = result.get("instructions", {})
        if name != "leasehold-redis" and lh:
            ratios = [f"{c} {lh[c] / got[c]:.1f}x" for c in COLUMNS if c in got and c in lh and got[c]]
            print(f"# leasehold-redis / {name}: {', '.join(ratios)}")
    if life is not None:
        from bench.peers import life_cost

        print()
        print(f"# Leasehold's store alone (bench/peers/life_cost.py, {args.life_jobs} jobs a path):")
        print("\n".join(life_cost.report(life)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
