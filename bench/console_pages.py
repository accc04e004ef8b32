"""Console pages at 1,000,000 jobs: p50/p99 of
every page an operator opens, per store, against the 200 ms p99 target.

    .venv/bin/python -m bench.console_pages [--jobs 1000000] [--requests 200]
        [--stores sqlite,postgresql,redis] [--budget 60] [--json FILE]

Each store is fresh (bench/stores.py: a copy of a migrated SQLite file, a
PostgreSQL database cloned from a migrated template, a new Redis key
prefix; removed afterwards) and loaded by bench/console_load.py: ``--jobs``
jobs of mixed statuses over 20 queues and 50 names, with their events,
counters and history buckets. Pages are rendered by the Flask test client
of the real app (``create_app``) as a logged-in operator: what a request
costs in the app and the store, without a network or gunicorn. Each page
is requested ``--requests`` times after 3 warm-up requests; a page slower
than ``--budget`` seconds in all stops early (at least 10 requests; the
table says how many).

Pages: the overview ``/``; the jobs list, filtered by queue, by name, by
both, and by status, queue and name; a deep page (a keyset cursor half-way
through the jobs, unfiltered and filtered); the job page of a Failed job
(events, attempts); the three searches of the jobs page (part of an id,
error text, a payload ``key=value``); the count preview of a bulk action
(``POST /jobs/bulk`` without ``confirm``), by queue (from the counters) and
by queue and name (``store.count_jobs``: an index count). The app is given
the allowance of searches the run makes (``LEASEHOLD_SEARCH_LIMIT``), as an
operator would raise it: the default answers 429 past 10 searches in 10 s.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import orjson
from werkzeug.security import generate_password_hash

from bench import console_load
from bench.console_load import MIX, NAMES, QUEUES, SPAN_S, name_of, queue_of, status_of
from bench.report import commit
from bench.stores import FreshStores, server_versions
from store import bulk, open_store
from store.cursor import encode_cursor
from store.lifecycle import JobStatus
from webapp import create_app

#: The issue's target for every page, p99 milliseconds.
TARGET_MS = 200.0
#: The queue and name the filtered pages use: jobs FIRST, FIRST + 1,000, … have both.
FIRST = 7 + QUEUES * 23
QUEUE, NAME = queue_of(FIRST), name_of(FIRST)
#: Requests of a page before the timed ones.
WARM_UP = 3
#: An id past every UUID: a cursor at (time, LAST_ID) starts with the job of that time.
LAST_ID = "ffffffff-ffff-ffff-ffff-ffffffffffff"


@dataclass(frozen=True, slots=True)
class Row:
    store: str
    page: str
    p50_ms: float
    p99_ms: float
    requests: int

    @property
    def met(self) -> bool:
        return self.p99_ms <= TARGET_MS

    @property
    def verdict(self) -> str:
        return "met" if self.met else "NOT"


def measure(fn: Callable[[], object], requests: int, budget_s: float) -> tuple[float, float, int]:
    """p50 and p99 in milliseconds of ``requests`` calls (after 3 warm-up calls),
    and how many calls were made: a page slower than ``budget_s`` in all stops
    early (at least 10 calls)."""
    for _ in range(WARM_UP):
        fn()
    times: list[float] = []
    deadline = time.monotonic() + budget_s
    while len(times) < requests and (len(times) < 10 or time.monotonic() < deadline):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    cuts = statistics.quantiles(times, n=100, method="inclusive")
    return cuts[49], cuts[98], len(times)


def logged_in(url: str, store: object, searches: int) -> tuple[object, str]:
    """A test client of the real app on ``store``, logged in as an operator,
    and its CSRF token; the app lets the operator run ``searches`` searches a
    window (``LEASEHOLD_SEARCH_LIMIT``)."""
    password = "bench"
    users = f"bench:{generate_password_hash(password, method='pbkdf2:sha256:1000')}:operator"
    app = create_app(
        {
            "STORE_URL": url,
            "TESTING": True,
            "SECRET_KEY": "bench-0123456789abcdef0123456789abcdef",
            "USERS": users,
            "SEARCH_LIMIT": str(searches),
        }
    )
    app.extensions["leasehold"].close()
    app.extensions["leasehold"] = store
    client = app.test_client()

    def token(path: str) -> str:
        return client.get(path).text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]

    client.post("/login", data={"username": "bench", "password": password, "csrf_token": token("/login")})
    return client, token("/jobs")


def pages(store: object, loaded: console_load.Loaded, jobs: int) -> dict[str, tuple[str, dict | None]]:
    """Label -> (path, form of a POST or None for a GET)."""
    now = store.now()  # type: ignore[attr-defined]
    middle = now - 60.0 - SPAN_S / 2  # the copies' times end a minute before the load
    deep = encode_cursor(middle, LAST_ID)
    [sample] = store.list_jobs(limit=1, cursor=deep).items  # type: ignore[attr-defined]
    failed = loaded.templates[JobStatus.Failed].id
    both = f"queue={QUEUE}&name={NAME}"
    deep_filter, cancel = f"status=Completed&queue={QUEUE}", {"action": "cancel"}
    selected = [j.id for j in store.list_jobs(limit=50, cursor=deep).items]  # type: ignore[attr-defined]
    queued = {**cancel, "status": "Queued", "queue": QUEUE}
    return {
        "overview /": ("/", None),
        "jobs /jobs": ("/jobs", None),
        f"jobs ?queue={QUEUE}": (f"/jobs?queue={QUEUE}", None),
        f"jobs ?name={NAME}": (f"/jobs?name={NAME}", None),
        f"jobs ?{both}": (f"/jobs?{both}", None),
        f"jobs ?status=Failed&{both}": (f"/jobs?status=Failed&{both}", None),
        "deep page (cursor half-way)": (f"/jobs?cursor={deep}", None),
        f"deep page ?status=Completed&queue={QUEUE}": (f"/jobs?{deep_filter}&cursor={deep}", None),
        "job page (Failed, timeline)": (f"/jobs/{failed}", None),
        "search ?id=<8 hex, half-way>": (f"/jobs?id={sample.id[-8:]}", None),
        "search ?error=refused": ("/jobs?error=refused", None),
        "search ?payload=user=user-123": ("/jobs?payload=user%3Duser-123", None),
        f"bulk preview cancel, Queued in {QUEUE}": ("/jobs/bulk", queued),
        f"bulk preview cancel, {both}": ("/jobs/bulk", {**cancel, "queue": QUEUE, "name": NAME}),
        "bulk preview retry, error=refused": ("/jobs/bulk", {"action": "retry", "error": "refused"}),
        "bulk preview requeue, payload=user=user-123": (
            "/jobs/bulk", {"action": "requeue", "payload": "user=user-123"}),
        "bulk preview cancel, 50 selected rows": ("/jobs/bulk", {**cancel, "ids": selected}),
        "batches /batches": ("/batches", None),
        "new job /jobs/new": ("/jobs/new", None),
        "handlers /handlers": ("/handlers", None),
        "alerts /alerts": ("/alerts", None),
        f"handler metrics /handlers/{NAME}": (f"/handlers/{NAME}", None),
        f"handler metrics /handlers/{NAME}?window=7d": (f"/handlers/{NAME}?window=7d", None),
    }  # fmt: skip


@dataclass(frozen=True, slots=True)
class BulkRun:
    """A bulk operation on an error-text filter, run to its end."""

    store: str
    expected: int
    changed: int
    skipped: int
    seconds: float


def bulk_on_error(store: object, kind: str) -> BulkRun:
    """Retry every job whose error text has ``refused`` (the search the
    console's bulk form sends) as one bulk operation, advanced by
    ``store.bulk.run_pending`` in its batches, as a worker's maintenance runs
    it, until it finishes. The time is from the start to the last batch."""
    expected = bulk.preview(store, "retry", error="refused").eligible  # type: ignore[arg-type]
    t0 = time.perf_counter()
    operation = bulk.start(store, "retry", {"error": "refused"}, "bench", expected)  # type: ignore[arg-type]
    while not operation.finished:
        bulk.run_pending(store, "bench", budget_s=5.0)  # type: ignore[arg-type]
        operation = store.get_operation(operation.id)  # type: ignore[attr-defined]
    seconds = time.perf_counter() - t0
    return BulkRun(kind, expected, operation.changed, operation.skipped, seconds)


def bench_store(
    stores: FreshStores, kind: str, jobs: int, requests: int, budget_s: float, only: str = ""
) -> tuple[float, list[Row], BulkRun]:
    """Load a fresh store of ``kind``, time every page, then run a bulk
    operation on an error-text filter. Returns the load's seconds, the rows
    and the bulk run."""
    rows = []
    with stores.fresh(kind) as url, open_store(url) as store:
        print(f"# {kind}: loading {jobs:,} jobs…", file=sys.stderr, flush=True)
        loaded = console_load.load(store, jobs)
        print(f"# {kind}: loaded in {loaded.seconds:,.0f} s; {loaded.by_status}", file=sys.stderr, flush=True)
        # The listing index answers a filter with the loaded jobs.
        listed = store.list_jobs(status=JobStatus.Completed, queue=QUEUE, name=NAME, limit=50).items
        wanted = sum(1 for i in range(FIRST, jobs, QUEUES * NAMES) if status_of(i) is JobStatus.Completed)
        assert len(listed) == min(50, wanted) > 0, (len(listed), wanted)
        assert all(j.queue == QUEUE and j.name == NAME and j.status is JobStatus.Completed for j in listed)
        parts = [w for w in only.split(",") if w] or [""]
        timed = {k: v for k, v in pages(store, loaded, jobs).items() if any(w in k for w in parts)}
        searches = sum(label.startswith("search") for label in timed) * (requests + WARM_UP)
        client, csrf = logged_in(url, store, max(1, searches))
        for label, (path, form) in timed.items():

            def get(path: str = path, form: dict | None = form) -> None:
                if form is None:
                    response = client.get(path)  # type: ignore[attr-defined]
                else:
                    response = client.post(path, data={**form, "csrf_token": csrf})  # type: ignore[attr-defined]
                assert response.status_code == 200, (path, response.status_code, response.text[:300])

            p50, p99, n = measure(get, requests, budget_s)
            rows.append(Row(kind, label, p50, p99, n))
            verdict = rows[-1].verdict
            line = f"{kind:<10} {label:<44} p50 {p50:7.1f} ms  p99 {p99:7.1f} ms  ({n}) {verdict}"
            print(f"# {line}", file=sys.stderr, flush=True)
        ran = bulk_on_error(store, kind)
        print(f"# {kind}: bulk retry on error=refused: {ran.changed:,} changed of {ran.expected:,} "
              f"in {ran.seconds:,.1f} s", file=sys.stderr, flush=True)  # fmt: skip
    return loaded.seconds, rows, ran


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def header(args: argparse.Namespace, kinds: list[str]) -> list[str]:
    mix = ", ".join(f"{s.name} {share / 100:g} %" for s, share in MIX)
    return [
        f"# Console pages, {datetime.now(UTC).isoformat(timespec='seconds')}",
        f"# command: python -m bench.console_pages {' '.join(sys.argv[1:])}".rstrip(),
        f"# machine: {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
        f"CPython {platform.python_version()}; load average at start {loadavg()}",
        f"# commit: {commit()}",
        f"# stores: {'; '.join(server_versions(kinds).values())}",
        f"# jobs: {args.jobs:,} a store ({mix}; then {console_load.IN_PROGRESS} of the Queued claimed), "
        f"{QUEUES} queues, {NAMES} names, over {SPAN_S / 86400:g} days",
        f"# pages: Flask test client of the real app, logged in as an operator; {args.requests} requests "
        f"a page after 3 warm-up ones (fewer past {args.budget:g} s); target p99 ≤ {TARGET_MS:g} ms",
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--stores", default="sqlite,postgresql,redis")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per page before stopping early")
    parser.add_argument("--json", help="also write the rows and load times to this file")
    parser.add_argument(
        "--only",
        default="",
        help="time only the pages whose label contains one of these texts (comma-separated)",
    )
    args = parser.parse_args()
    kinds = [s.strip() for s in args.stores.split(",") if s.strip()]
    lines = header(args, kinds)
    print("\n".join(lines), file=sys.stderr, flush=True)
    rows: list[Row] = []
    loads: dict[str, float] = {}
    runs: list[BulkRun] = []
    with tempfile.TemporaryDirectory(prefix="lh-console-") as tmp:
        stores = FreshStores(Path(tmp))
        try:
            for kind in kinds:
                loads[kind], got, ran = bench_store(
                    stores, kind, args.jobs, args.requests, args.budget, args.only
                )
                rows += got
                runs.append(ran)
        finally:
            stores.close()
    print("\n".join(lines))
    print(f"# load: {', '.join(f'{k} {s:,.0f} s' for k, s in loads.items())}")
    print()
    print("| store | page | p50 ms | p99 ms | requests | p99 ≤ 200 ms |")
    print("|---|---|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r.store} | {r.page} | {r.p50_ms:.1f} | {r.p99_ms:.1f} | {r.requests} | {r.verdict} |")
    print()
    print("| store | bulk retry on error=refused: jobs expected | changed | skipped | seconds |")
    print("|---|---:|---:|---:|---:|")
    for b in runs:
        print(f"| {b.store} | {b.expected:,} | {b.changed:,} | {b.skipped:,} | {b.seconds:,.1f} |")
    print(f"\n# load average at end {loadavg()}")
    if args.json:
        Path(args.json).write_bytes(
            orjson.dumps(
                {
                    "header": lines,
                    "loads": loads,
                    "rows": [asdict(r) for r in rows],
                    "bulk": [asdict(b) for b in runs],
                }
            )
        )


if __name__ == "__main__":
    main()
