"""Shared by the peer scripts (runs in bench/.peers-venv; needs only redis-py).

Every peer's no-op task does one ``INCR`` of COUNTER, so completion is observed
the same way for all of them; the driver polls it every POLL_S.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
URL = os.environ.get("BENCH_PEERS_REDIS_URL", "redis://127.0.0.1:6379/13")
COUNTER = "bench-peers:done"
POLL_S = 0.02


def client() -> redis.Redis:
    return redis.Redis.from_url(URL)


def done(conn: redis.Redis) -> int:
    return int(conn.get(COUNTER) or 0)


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM the worker's process group, SIGKILL it after 10 s."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        except ProcessLookupError:
            pass


def drain(cmd: list[str], jobs: int, timeout: float, count=None, cwd=HERE, env=None) -> dict[str, float]:
    """Start ``cmd`` (the workers) and time until ``count()`` reaches ``jobs``.

    wall: from spawning the workers (interpreter start-up included);
    steady: jobs/s from the first observed completion to the last one.
    """
    conn = client() if count is None else None
    count = count or (lambda: done(conn))
    env = env or dict(os.environ, PYTHONPATH=str(HERE), BENCH_PEERS_REDIS_URL=URL)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    t_first = c_first = None
    try:
        while True:
            n = count()
            now = time.perf_counter()
            if n and t_first is None:
                t_first, c_first = now, n
            if n >= jobs:
                break
            if now - t0 > timeout:
                raise TimeoutError(f"{n}/{jobs} done after {timeout:.0f} s (~{n / (now - t0):.0f} jobs/s)")
            if proc.poll() is not None and count() < jobs:
                err = proc.stderr.read().decode(errors="replace")[-1500:]
                raise RuntimeError(f"workers exited with {proc.returncode} at {n}/{jobs}: {err}")
            time.sleep(POLL_S)
    finally:
        stop(proc)
        if conn is not None:
            conn.close()
    wall = now - t0
    steady = (jobs - c_first) / (now - t_first) if now > t_first else float("nan")
    return {"wall_s": wall, "rate_wall": jobs / wall, "rate_steady": steady}


def report(result: dict) -> None:
    print("RESULT " + json.dumps(result), flush=True)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def args() -> tuple[int, int, int, float]:
    """jobs, processes, threads, timeout from argv."""
    jobs, procs, threads, timeout = (sys.argv[1:] + [None] * 4)[:4]
    return int(jobs or 10000), int(procs or 2), int(threads or 8), float(timeout or 180)
