"""API enqueue throughput and latency under gunicorn, per store.

    .venv/bin/python bench/api_enqueue.py [--requests 2000] [--clients 16] [--workers 4] [--threads 4]
                                          [--stores sqlite,postgresql,redis]

For each store: a fresh store (SQLite file, PostgreSQL database cloned from a
migrated template, or a Redis key prefix), ``gunicorn -c gunicorn.conf.py
wsgi:app`` with ``--workers`` processes of ``--threads`` threads (access log
off), then ``--clients`` threads each sending ``POST /api/jobs`` over its own
keep-alive connection (http.client) until ``--requests`` are done. Figures:
requests per second of wall time (first request to last answer) and the
client-side latency p50 / p99 / max. Every answer must be 202 and the store
must then hold every job. Client and server share the machine's cores, so
the figures are a floor for a server with cores of its own.

PostgreSQL and Redis come from LEASEHOLD_TEST_PG_URL / LEASEHOLD_TEST_REDIS_URL
(defaults: the local servers); the store is removed afterwards.
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from store import StoreSettings, open_store
from tests.backends import PgTemplate, SqliteTemplate, delete_redis_prefix, redis_url_with_prefix
from tests.web.gunicorn_proc import OPERATOR_TOKEN, Gunicorn

BODY = json.dumps({"name": "index-source", "payload": {"path": "src/app/module.py", "lines": 120}}).encode()
HEADERS = {"Authorization": f"Bearer {OPERATOR_TOKEN}", "Content-Type": "application/json"}
WARMUP = 50


def fresh_store(kind: str, folder: Path) -> tuple[str, Callable[[], None]]:
    """A URL of an empty, migrated store and its clean-up."""
    if kind == "sqlite":
        return SqliteTemplate(folder).clone(folder), lambda: None
    if kind == "postgresql":
        template = PgTemplate()
        url, drop = template.clone()

        def cleanup() -> None:
            drop()
            template.drop()

        return url, cleanup
    if kind == "redis":
        url, prefix = redis_url_with_prefix()
        return url, lambda: delete_redis_prefix(url, prefix)
    raise ValueError(kind)


def client(port: int, count: Callable[[], bool], latencies: list[float], errors: list[str]) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        while count():
            t0 = time.perf_counter()
            try:
                conn.request("POST", "/api/jobs", body=BODY, headers=HEADERS)
                response = conn.getresponse()
                response.read()
            except (OSError, http.client.HTTPException) as exc:
                errors.append(repr(exc))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                continue
            latencies.append(time.perf_counter() - t0)
            if response.status != 202:
                errors.append(f"HTTP {response.status}")
    finally:
        conn.close()


def run(server: Gunicorn, requests: int, clients: int) -> tuple[float, list[float], list[str]]:
    left = [requests]
    lock = threading.Lock()

    def take() -> bool:
        with lock:
            left[0] -= 1
            return left[0] >= 0

    latencies: list[float] = []
    errors: list[str] = []
    threads = [
        threading.Thread(target=client, args=(server.port, take, latencies, errors)) for _ in range(clients)
    ]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, latencies, errors


def ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bench_store(kind: str, args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        url, cleanup = fresh_store(kind, folder)
        try:
            with Gunicorn(
                url, folder / "gunicorn.log", args.workers, args.threads, access_log=False
            ) as server:
                run(server, WARMUP, min(args.clients, WARMUP))
                wall, latencies, errors = run(server, args.requests, args.clients)
            with open_store(url, StoreSettings()) as store:
                stored = store.counts().by_status["Queued"]
        finally:
            cleanup()
    ok = len(latencies) - sum(e.startswith("HTTP") for e in errors)
    print(
        f"{kind:<10} {args.requests / wall:8.0f} req/s   p50 {ms(latencies, 0.50):6.1f} ms   "
        f"p99 {ms(latencies, 0.99):6.1f} ms   max {max(latencies) * 1000:6.1f} ms   "
        f"mean {statistics.fmean(latencies) * 1000:6.1f} ms   ok {ok}/{args.requests}   "
        f"stored {stored - WARMUP}   errors {len(errors)}"
    )
    if errors:
        print(f"           first errors: {errors[:3]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--stores", default="sqlite,postgresql,redis")
    args = parser.parse_args()
    stores = [s for s in args.stores.split(",") if s]
    if "redis" in stores and importlib.util.find_spec("store.redis.store") is None:
        print("redis: skipped (store.redis is not importable)")
        stores.remove("redis")
    print(
        f"API enqueue: POST /api/jobs ({len(BODY)} B body), {args.requests} requests after {WARMUP} warm-up, "
        f"{args.clients} client threads (keep-alive), gunicorn gthread "
        f"{args.workers} workers x {args.threads} threads, access log off"
    )
    print(
        f"machine: {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}, "
        f"{platform.system()} {platform.release()}; client and server on the same cores"
    )
    for kind in stores:
        bench_store(kind, args)


if __name__ == "__main__":
    main()
