"""Console render times at scale: p50/p99 of the overview, a filtered job list
and a job page, per store, with a large store behind them.

    PYTHONPATH=. .venv/bin/python bench/console_pages.py [--jobs 1000000] [--requests 200]
        [--stores sqlite,postgresql,redis]

Each store is fresh (a temporary SQLite file; a new PostgreSQL database on
LEASEHOLD_TEST_PG_URL's server, dropped afterwards; a new key prefix on
LEASEHOLD_TEST_REDIS_URL's server, deleted afterwards). Jobs are loaded with
``enqueue_many`` (the contract's bulk path, one transaction / pipeline per
1,000), over 4 queues and 20 names; then a few thousand are run through the
store's own operations so the pages have completions, failures, retries and
workers to show, and the SQL stores are ANALYZEd. Pages are rendered by the
Flask test client as a logged-in operator: what a request costs in the app
and the store, without a network. A page slower than ``--budget`` seconds in
all is measured over fewer requests (at least 10); the table says how many.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from werkzeug.security import generate_password_hash

from store import JobStore, open_store
from store.models import JobSpec, WorkerInfo
from webapp import create_app

QUEUES = 4
NAMES = 20
CHUNK = 1000


@contextmanager
def fresh_store(kind: str) -> Iterator[tuple[str, JobStore]]:
    """A new, empty store of ``kind``; removed afterwards."""
    if kind == "sqlite":
        from store.sql import migrate

        with tempfile.TemporaryDirectory(prefix="lh-bench-") as folder:
            url = f"sqlite:///{folder}/bench.db"
            migrate(url)
            store = open_store(url)
            try:
                yield url, store
            finally:
                store.close()
    elif kind == "postgresql":
        from tests.backends import PgTemplate

        template = PgTemplate()  # a migrated database of its own, dropped below
        try:
            url = template.url_for(template.name)
            store = open_store(url)
            try:
                yield url, store
            finally:
                store.close()
        finally:
            template.drop()
    elif kind == "redis":
        from tests.backends import delete_redis_prefix, redis_url_with_prefix

        url, prefix = redis_url_with_prefix()
        store = open_store(url)
        try:
            yield url, store
        finally:
            store.close()
            delete_redis_prefix(url, prefix)
    else:
        raise SystemExit(f"unknown store {kind}")


def load(store: JobStore, n: int) -> float:
    """Enqueue ``n`` jobs with enqueue_many; returns seconds taken."""
    t0 = time.perf_counter()
    done = 0
    while done < n:
        size = min(CHUNK * 20, n - done)
        store.enqueue_many(
            JobSpec(f"name-{i % NAMES}", {"i": i, "path": f"/src/module_{i}.py"}, queue=f"q{i % QUEUES}")
            for i in range(done, done + size)
        )
        done += size
        if done % 100_000 == 0:
            print(f"  {done:,} loaded ({done / (time.perf_counter() - t0):,.0f}/s)", flush=True)
    return time.perf_counter() - t0


def analyze(kind: str, url: str) -> None:
    """Refresh the SQL planner's statistics after the bulk load, as PostgreSQL's
    autovacuum (or an operator's ANALYZE) would; without it PostgreSQL plans the
    filtered listing with estimates from the empty table."""
    if kind not in ("sqlite", "postgresql"):
        return
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("ANALYZE"))
    finally:
        engine.dispose()


def exercise(store: JobStore) -> str:
    """Run some jobs through the store: completions, failures, retries, a worker.
    Returns the id of a job for the job page (one with a few events)."""
    store.worker_heartbeat(WorkerInfo("bench-w1", "bench", os.getpid(), ["q0", "q1"], 8, []))
    error = {"type": "RuntimeError", "message": "boom", "traceback": "Traceback ...\nRuntimeError: boom"}
    sample = ""
    for round_ in range(5):
        claimed = store.claim("bench-w1", ["q0", "q1"], limit=1000)
        for k, job in enumerate(claimed):
            if k % 10 == 0:
                store.fail(job.id, job.lease_token, error, permanent=round_ % 2 == 0)
                sample = sample or job.id
            else:
                store.complete(job.id, job.lease_token, {"ok": True, "k": k})
    return sample


def measure(fn: Callable[[], object], requests: int, budget_s: float) -> tuple[float, float, int]:
    """p50 and p99 in milliseconds of ``requests`` calls (after 3 warm-up calls),
    and how many calls were made: a page slower than ``budget_s`` in all stops
    early (at least 10 calls)."""
    for _ in range(3):
        fn()
    times: list[float] = []
    deadline = time.monotonic() + budget_s
    while len(times) < requests and (len(times) < 10 or time.monotonic() < deadline):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    cuts = statistics.quantiles(times, n=100, method="inclusive")
    return cuts[49], cuts[98], len(times)


Row = tuple[str, str, int, float, float, int]


def bench_store(kind: str, jobs: int, requests: int, budget_s: float) -> list[Row]:
    rows = []
    with fresh_store(kind) as (url, store):
        print(f"{kind}: loading {jobs:,} jobs…", flush=True)
        seconds = load(store, jobs)
        print(f"{kind}: loaded in {seconds:,.0f} s ({jobs / seconds:,.0f} jobs/s)", flush=True)
        job_id = exercise(store)
        analyze(kind, url)
        password = "bench"
        users = f"bench:{generate_password_hash(password, method='pbkdf2:sha256:1000')}:operator"
        app = create_app({"STORE_URL": url, "TESTING": True, "SECRET_KEY": "bench", "USERS": users})
        app.extensions["leasehold"].close()
        app.extensions["leasehold"] = store
        client = app.test_client()
        page = client.get("/login").text
        token = page.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
        client.post("/login", data={"username": "bench", "password": password, "csrf_token": token})
        pages = {
            "overview /": "/",
            "jobs ?status=Queued&queue=q2&name=name-6": "/jobs?status=Queued&queue=q2&name=name-6",
            "job page (failed, with timeline)": f"/jobs/{job_id}",
        }
        for label, path in pages.items():

            def get(path: str = path) -> None:
                response = client.get(path)
                assert response.status_code == 200, (path, response.status_code)

            p50, p99, n = measure(get, requests, budget_s)
            rows.append((kind, label, jobs, p50, p99, n))
            print(f"{kind:<10} {label:<42} p50 {p50:7.1f} ms  p99 {p99:7.1f} ms  ({n} requests)", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--stores", default="sqlite,postgresql,redis")
    parser.add_argument("--budget", type=float, default=180.0, help="seconds per page before stopping early")
    args = parser.parse_args()
    rows = []
    for kind in [s.strip() for s in args.stores.split(",") if s.strip()]:
        rows += bench_store(kind, args.jobs, args.requests, args.budget)
    print()
    print("| store | page | jobs | p50 ms | p99 ms | requests |")
    print("|---|---|---:|---:|---:|---:|")
    for kind, label, jobs, p50, p99, n in rows:
        print(f"| {kind} | {label} | {jobs:,} | {p50:.1f} | {p99:.1f} | {n} |")


if __name__ == "__main__":
    main()
