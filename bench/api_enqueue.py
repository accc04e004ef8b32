"""API enqueue under gunicorn, per store, side by side with a bare Flask app.

    .venv/bin/python -m bench.api_enqueue [--requests 2000] [--rounds 5] [--clients 16]
                                          [--workers 2] [--threads 4] [--stores sqlite,postgresql,redis]
                                          [--routes jobs,async] [--json FILE]

For each store: a fresh store (SQLite file, PostgreSQL database cloned from a
migrated template, or a Redis key prefix) and two servers started with the
same ``gunicorn -c gunicorn.conf.py`` (``--workers`` processes of
``--threads`` gthread threads, access log off):

* Leasehold: ``bench.api_app:app``, the standalone app of ``wsgi.py`` plus one
  async endpoint (``POST /orders/<int:order_id>/invoice`` -> job
  ``make-invoice``);
* bare: ``bench.bare_app:app``, a Flask app whose same two routes parse the
  same body with ``request.get_json()``, check that a bearer header is there
  and answer 202 with a job-shaped JSON body and ``Location``, storing nothing.

Then, for each route (``jobs``: ``POST /api/jobs``; ``async``: the async
endpoint), ``--rounds`` rounds that alternate bare and Leasehold: in each,
``--clients`` threads send requests over their own keep-alive connection
(http.client) until ``--requests`` are done. A round's figures: requests
per second of wall time (first request to last answer) and the client-side
latency p50 / p99. The table gives the median over rounds of each, and the
ratio Leasehold / bare (the median of the rounds' paired ratios) against the
issue's target for the store. Every answer must be 202, and the store must
then hold every job Leasehold answered.

Client and server share the machine's cores (and, on a shared machine, other
people's work: the load average is printed before and after), so compare
ratios within one run, not req/s across runs.

PostgreSQL and Redis come from LEASEHOLD_TEST_PG_URL / LEASEHOLD_TEST_REDIS_URL
(defaults: the local servers); the store is removed afterwards. ``--json FILE`` also writes each store and
route's ratio and target there (bench/peers/run.py reads it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import importlib.util
import json
import os
import platform
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.report import commit
from store import StoreSettings, open_store
from tests.backends import (
    PG_ADMIN_URL,
    REDIS_URL,
    PgTemplate,
    SqliteTemplate,
    delete_redis_prefix,
    redis_url_with_prefix,
)
from tests.web.gunicorn_proc import OPERATOR_TOKEN, Gunicorn

REPO = Path(__file__).resolve().parent.parent

BODY = json.dumps({"name": "index-source", "payload": {"path": "src/app/module.py", "lines": 120}}).encode()
HEADERS = {"Authorization": f"Bearer {OPERATOR_TOKEN}", "Content-Type": "application/json"}
#: Route name -> path; both apps serve both.
ROUTES = {"jobs": "/api/jobs", "async": "/orders/42/invoice"}
APPS = {"bare": "bench.bare_app:app", "leasehold": "bench.api_app:app"}
#: The target: Leasehold's req/s at least this fraction of the bare app's.
TARGETS = {"redis": 0.6, "postgresql": 0.5, "sqlite": 0.35}
WARMUP = 100


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


def client(
    port: int, path: str, count: Callable[[], bool], latencies: list[float], errors: list[str]
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        while count():
            t0 = time.perf_counter()
            try:
                conn.request("POST", path, body=BODY, headers=HEADERS)
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


@dataclass
class Round:
    rate: float  # requests per second
    p50_ms: float
    p99_ms: float
    accepted: int  # 202 answers
    errors: list[str]


def run(port: int, path: str, requests: int, clients: int) -> Round:
    left = [requests]
    lock = threading.Lock()

    def take() -> bool:
        with lock:
            left[0] -= 1
            return left[0] >= 0

    latencies: list[float] = []
    errors: list[str] = []
    threads = [
        threading.Thread(target=client, args=(port, path, take, latencies, errors)) for _ in range(clients)
    ]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    bad = sum(e.startswith("HTTP") for e in errors)
    return Round(requests / wall, ms(latencies, 0.50), ms(latencies, 0.99), len(latencies) - bad, errors)


def ms(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Series:
    rounds: list[Round] = field(default_factory=list)

    def median(self, attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in self.rounds)


def bench_store(kind: str, args: argparse.Namespace, routes: list[str]) -> list[dict[str, object]]:
    """Run ``routes`` on a fresh store of ``kind``, print its lines; each route's figures."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        url, cleanup = fresh_store(kind, folder)
        series = {(app, route): Series() for app in APPS for route in routes}
        try:
            servers = {
                app: Gunicorn(
                    url, folder / f"{app}.log", args.workers, args.threads, access_log=False, app=target
                )
                for app, target in APPS.items()
            }
            try:
                for server in servers.values():
                    server.__enter__()
                for route in routes:
                    for server in servers.values():
                        run(server.port, ROUTES[route], WARMUP, min(args.clients, WARMUP))
                for _ in range(args.rounds):
                    for route in routes:
                        for app, server in servers.items():
                            series[app, route].rounds.append(
                                run(server.port, ROUTES[route], args.requests, args.clients)
                            )
            finally:
                for server in servers.values():
                    server.stop()
            with open_store(url, StoreSettings()) as store:
                stored = store.counts().by_status["Queued"] - WARMUP * len(routes)
        finally:
            cleanup()
    accepted, out = 0, []
    for route in routes:
        bare, ours = series["bare", route], series["leasehold", route]
        accepted += sum(r.accepted for r in ours.rounds)
        ratios = [o.rate / b.rate for o, b in zip(ours.rounds, bare.rounds, strict=True)]
        ratio = statistics.median(ratios)
        target = TARGETS[kind]
        for name, s in (("bare", bare), ("leasehold", ours)):
            print(
                f"{kind:<10} {route:<6} {name:<9} {s.median('rate'):7.0f} req/s   "
                f"p50 {s.median('p50_ms'):6.1f} ms   p99 {s.median('p99_ms'):6.1f} ms   "
                f"(rounds: {' '.join(f'{r.rate:.0f}' for r in s.rounds)})"
            )
        print(
            f"{kind:<10} {route:<6} ratio     {ratio:7.2f}   (rounds: {' '.join(f'{r:.2f}' for r in ratios)})"
            f"   target >= {target:.2f}: {'met' if ratio >= target else 'NOT met'}"
        )
        out.append({
            "store": kind, "route": route, "ratio": ratio, "target": target,
            "bare": bare.median("rate"), "leasehold": ours.median("rate"),
        })  # fmt: skip
        for name, s in (("bare", bare), ("leasehold", ours)):
            errors = [e for r in s.rounds for e in r.errors]
            if errors:
                print(f"           {name} errors: {len(errors)}, first: {errors[:3]}")
    if stored != accepted:
        print(f"{kind:<10} STORED {stored} jobs but Leasehold accepted {accepted}")
        for row in out:
            row["error"] = f"the store holds {stored} jobs, Leasehold accepted {accepted}"
    return out


def store_versions(stores: list[str]) -> str:
    out = []
    for kind in stores:
        try:
            if kind == "sqlite":
                out.append(f"SQLite {sqlite3.sqlite_version}")
            elif kind == "postgresql":
                import psycopg

                from tests.backends import _pg_dsn

                with psycopg.connect(_pg_dsn(PG_ADMIN_URL)) as conn:
                    row = conn.execute("SHOW server_version").fetchone()
                out.append(f"PostgreSQL {row[0] if row else '?'}")
            elif kind == "redis":
                import redis

                info = redis.Redis.from_url(REDIS_URL).info("server")
                out.append(f"Redis {info['redis_version']}")
        except Exception as exc:  # a version is information, not a reason to stop
            out.append(f"{kind} ? ({exc})")
    return ", ".join(out)


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per app and route (alternating)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--stores", default="sqlite,postgresql,redis")
    parser.add_argument("--routes", default="jobs,async", help=f"of {', '.join(ROUTES)}")
    parser.add_argument("--json", type=Path, default=None, help="also write each ratio and target here")
    args = parser.parse_args()
    stores = [s for s in args.stores.split(",") if s]
    routes = [r for r in args.routes.split(",") if r]
    if unknown := set(routes) - set(ROUTES):
        parser.error(f"unknown routes: {', '.join(sorted(unknown))}")
    if "redis" in stores and importlib.util.find_spec("store.redis.store") is None:
        print("redis: skipped (store.redis is not importable)")
        stores.remove("redis")
    print(
        f"API enqueue vs bare Flask: {', '.join(f'{r} = POST {ROUTES[r]}' for r in routes)} "
        f"({len(BODY)} B body); {args.rounds} rounds x {args.requests} requests per app and route "
        f"(alternating bare / leasehold) after {WARMUP} warm-up; {args.clients} client threads (keep-alive)"
    )
    print(
        f"gunicorn -c gunicorn.conf.py: gthread, {args.workers} workers x {args.threads} threads, "
        "access log off; same config for both apps"
    )
    print(
        f"commit {commit()}, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} cores, "
        f"{platform.python_implementation()} {platform.python_version()}, {platform.system()} "
        f"{platform.release()}; load average {load()}; client and server on the same cores"
    )
    print(f"stores: {store_versions(stores)}")
    results = [row for kind in stores for row in bench_store(kind, args, routes)]
    print(f"load average after: {load()}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
