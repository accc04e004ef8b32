"""Leasehold side by side with huey, dramatiq, rq, celery and procrastinate: the same no-op workload.

    make bench-peers            # creates bench/.peers-venv, then runs this
    .venv/bin/python bench/peers/run.py [--jobs 10000] [--processes 2] [--threads 8]
        [--timeout 180] [--peers huey,dramatiq,rq,rq-fork,celery,procrastinate]
        [--stores redis,postgresql]

For every system: enqueue N no-op jobs in bulk where it has a bulk/pipelined
API (Leasehold ``enqueue_many``, rq ``enqueue_many``, huey LPUSH of serialised
tasks, procrastinate ``batch_defer``; dramatiq and celery publish one message per
call), then start P worker processes and time until all N are done. Two rates:

* steady: jobs/s from the first completion seen to the last (start-up left out);
* wall:   N / seconds from spawning the workers to the last completion.

Completion is polled every 20 ms: the peers' task INCRs a Redis counter (one
extra round trip per job that Leasehold does not pay; Leasehold instead writes
its result, status and a job event); Leasehold is polled with ``store.counts()``.

Peers run in bench/.peers-venv (made by bench/peers/setup.sh) against
BENCH_PEERS_REDIS_URL (default redis://127.0.0.1:6379/13). That database must be
empty at start (the run refuses otherwise) and is FLUSHDB-ed after each peer.
Leasehold's Redis store uses a fresh key prefix on LEASEHOLD_TEST_REDIS_URL and
its PostgreSQL store a fresh database on LEASEHOLD_TEST_PG_URL; both removed after.
procrastinate gets a fresh database ``bench_peers_procrastinate_<random>`` on that
same server (created and dropped by its script; dropped here too if it is left).
Every run is bounded by --timeout; a peer that is not installed or fails is
reported as skipped, with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

import redis  # noqa: E402
from common import URL as PEERS_URL  # noqa: E402
from common import drain  # noqa: E402

from bench.store_throughput import fresh_url  # noqa: E402
from bench.worker_throughput import FLASK, worker_env  # noqa: E402
from store import StoreSettings, open_store  # noqa: E402

VENV_PY = REPO / "bench" / ".peers-venv" / "bin" / "python"
INSTALLED = REPO / "bench" / ".peers-venv" / "installed"
PEERS = {  # name -> (script, extra argv, package that must be installed)
    "huey": ("peer_huey.py", [], "huey"),
    "dramatiq": ("peer_dramatiq.py", [], "dramatiq"),
    "rq": ("peer_rq.py", ["simple"], "rq"),
    "rq-fork": ("peer_rq.py", ["fork"], "rq"),
    "celery": ("peer_celery.py", [], "celery"),
    "procrastinate": ("peer_procrastinate.py", [], "procrastinate"),
}
PG_PREFIX = "bench_peers_procrastinate_"  # the only databases a peer creates (and drops)


def check_empty(conn: redis.Redis) -> None:
    n = conn.dbsize()
    if n:
        raise SystemExit(
            f"refusing to run: {PEERS_URL} holds {n} keys; point BENCH_PEERS_REDIS_URL at an empty database"
        )


def drop_pg_db(name: str) -> None:
    """DROP one database this run named (never any other) on LEASEHOLD_TEST_PG_URL's server."""
    import psycopg
    from psycopg import sql

    assert name.startswith(PG_PREFIX)
    admin = os.environ["LEASEHOLD_TEST_PG_URL"].replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(admin, autocommit=True) as pg:
        pg.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def run_peer(name: str, jobs: int, procs: int, threads: int, timeout: float, conn: redis.Redis) -> dict:
    script, extra, package = PEERS[name]
    installed = INSTALLED.read_text().split() if INSTALLED.exists() else []
    if not VENV_PY.exists() or package not in installed:
        return {"skipped": f"{package} not installed in bench/.peers-venv (run bench/peers/setup.sh)"}
    check_empty(conn)
    env = dict(os.environ, BENCH_PEERS_REDIS_URL=PEERS_URL, PYTHONPATH=str(HERE))
    pg_db = None
    if name == "procrastinate":
        if not os.environ.get("LEASEHOLD_TEST_PG_URL"):
            return {"skipped": 'LEASEHOLD_TEST_PG_URL not set (eval "$(scripts/services.sh)")'}
        pg_db = env["BENCH_PEERS_PG_DB"] = f"{PG_PREFIX}{uuid.uuid4().hex[:10]}"
    cmd = [str(VENV_PY), str(HERE / script), str(jobs), str(procs), str(threads), str(timeout), *extra]
    try:
        out = subprocess.run(cmd, cwd=HERE, capture_output=True, text=True, timeout=timeout + 60, env=env)
    except subprocess.TimeoutExpired:
        return {"skipped": f"no result within {timeout + 60:.0f} s"}
    finally:
        conn.flushdb()  # only the peers' database, checked empty before the run
        if pg_db:
            drop_pg_db(pg_db)  # normally already dropped by the peer's script
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
    return {"skipped": f"failed (exit {out.returncode}): {tail[:200]}"}


def run_leasehold(kind: str, jobs: int, procs: int, threads: int, timeout: float, tmp: Path) -> dict:
    url, cleanup = fresh_url(kind, tmp)
    store = open_store(url, StoreSettings())
    try:
        t0 = time.perf_counter()
        store.enqueue_many([("noop", None)] * jobs)
        enq = time.perf_counter() - t0
        cmd = [FLASK, "--app", "wsgi", "worker", "--burst", "--processes", str(procs),
               "--concurrency", str(threads), "--name", "bench-peers", "--log-level", "WARNING"]  # fmt: skip
        res = drain(
            cmd,
            jobs,
            timeout,
            count=lambda: store.counts().by_status["Completed"],
            cwd=REPO,
            env=worker_env(url),
        )
        return {"enqueue_s": enq, **res, "workers": f"{procs} procs x {threads} threads"}
    except (TimeoutError, RuntimeError) as exc:
        return {"skipped": f"failed: {str(exc)[:200]}"}
    finally:
        store.close()
        if cleanup:
            cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8, help="threads a process where the system has them")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds a system gets to drain")
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--stores", default="redis,postgresql")
    args = parser.parse_args()

    conn = redis.Redis.from_url(PEERS_URL)
    check_empty(conn)
    print(f"# {args.jobs} no-op jobs, bulk enqueue then drain with {args.processes} worker processes")
    print(f"# peers on {PEERS_URL}; {platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")  # fmt: skip
    results: dict[str, dict] = {}
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for kind in [s for s in args.stores.split(",") if s]:
            name = f"leasehold-{kind}"
            results[name] = run_leasehold(
                kind, args.jobs, args.processes, args.threads, args.timeout, Path(tmp)
            )
            print(f"# {name}: {json.dumps(results[name])}", flush=True)
    for name in [p for p in args.peers.split(",") if p]:
        results[name] = run_peer(name, args.jobs, args.processes, args.threads, args.timeout, conn)
        print(f"# {name}: {json.dumps(results[name])}", flush=True)
    conn.close()

    ours = {k: v for k, v in results.items() if k.startswith("leasehold") and "skipped" not in v}
    head = f"{'system':<21} {'enqueue/s':>10} {'steady/s':>9} {'wall/s':>7} {'wall s':>7}  "
    head += "  ".join(f"{k.split('-', 1)[1] + ' x':>10}" for k in ours) + "  workers"
    print(head)
    for name, r in results.items():
        if "skipped" in r:
            print(f"{name:<21} skipped: {r['skipped']}")
            continue
        ratios = "  ".join(f"{o['rate_steady'] / r['rate_steady']:>10.2f}" for o in ours.values())
        print(
            f"{name:<21} {args.jobs / r['enqueue_s']:>10,.0f} {r['rate_steady']:>9,.0f} "
            f"{r['rate_wall']:>7,.0f} {r['wall_s']:>7.1f}  {ratios}  {r['workers']}"
        )
    print("# 'redis x' / 'postgresql x': Leasehold's steady jobs/s on that store divided by the row's")


if __name__ == "__main__":
    main()
