"""Every Leasehold benchmark, repeated, in one table.

    make bench                                   # the default run below
    make bench-scale                             # also with 1,000,000 finished jobs in the store
    .venv/bin/python -m bench.run_all [--stores sqlite,postgresql,redis]
        [--metrics enqueue,drain,latency,recovery,bytes] [--runs 3] [--quick] [--scale]
        [--single 5000] [--threads 4] [--bulk 50000] [--drain-jobs 20000] [--concurrency 8]
        [--latency-jobs 150] [--gap-ms 100] [--recovery-jobs 100000] [--recovery-cap 30]
        [--bytes-jobs 10000] [--scale-jobs 1000000] [--json results.json]

Each measurement runs ``--runs`` times (3; 1 with ``--quick``, which also
makes every size small: a smoke run) on a fresh store per run, and the table
shows the median and min–max of the runs, the target the issue sets and
whether the median meets it. Groups (``--metrics``):

* enqueue: ``store.enqueue`` one job a call from 1 client thread, and from
  ``--threads`` client threads sharing the handle; ``store.enqueue_many``
  with 1,000 jobs a call. Jobs carry a 40-byte payload and go to a queue no
  worker reads. Checked: the store counts every job Queued.
* drain: ``--drain-jobs`` no-op jobs, then 1 and 2 ``leasehold worker
  --burst --concurrency N`` processes (``python -m leasehold.cli``); jobs/s from the first claim to the last
  completion (store clock, interpreter start-up left out). Checked: every job
  Completed with the result its lease holder's handler returned. The worker
  RSS row is the peak RSS (VmHWM) of each worker process in these runs.
* latency: one idle worker; jobs enqueued one at a time after a random
  0–``--gap-ms`` pause (so the worker is met at every stage of its idle
  backoff); ``completed_at - created_at`` on the store clock, p50 and p99.
* recovery: ``--recovery-jobs`` InProgress jobs with expired leases (claimed
  with a 5 s lease, the store clock moved 10 s on), then ``recover_expired``
  batches of the store's default size until none is left; total seconds and
  the longest unit that blocks the store (Redis: one script call, timed by the
  client, with the SLOWLOG in the notes; SQL: one batch transaction). A run
  stops after ``--recovery-cap`` seconds and its total is then projected.
* bytes: bytes per job of ``--bytes-jobs`` jobs, queued and then completed
  (Redis MEMORY USAGE of the jobs' keys and shared ones; PostgreSQL table + index sizes;
  SQLite pages in use).

``--scale`` loads ``--scale-jobs`` Completed jobs into one store per kind
(``bench/scale.py``) and repeats the enqueue, drain and latency groups on it;
those rows compare their median with the empty store's (within 20%).
PostgreSQL and Redis come from LEASEHOLD_TEST_PG_URL / LEASEHOLD_TEST_REDIS_URL
(``eval "$(scripts/services.sh)"``); every store is removed afterwards. The
table goes to stdout, progress to stderr. Exit status 1 when a measurement
failed (its row says "error"), not when a target is missed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench import measures
from bench.report import Row, commit, table
from bench.scale import load_finished
from bench.stores import KINDS, FreshStores, server_versions
from bench.worker_throughput import latency, throughput
from store import open_store

REPO = Path(__file__).resolve().parent.parent

GROUPS = ("enqueue", "drain", "latency", "recovery", "bytes")
SCALE_GROUPS = ("enqueue", "drain", "latency")
#: Sizes of a full run and of ``--quick``.
FULL = dict(
    single=5000,
    bulk=50_000,
    drain_jobs=20_000,
    latency_jobs=150,
    gap_ms=100.0,
    recovery_jobs=100_000,
    recovery_cap=30.0,
    bytes_jobs=10_000,
    scale_jobs=1_000_000,
)
QUICK = dict(
    single=500,
    bulk=5000,
    drain_jobs=2000,
    latency_jobs=20,
    gap_ms=50.0,
    recovery_jobs=5000,
    recovery_cap=10.0,
    bytes_jobs=1000,
    scale_jobs=20_000,
)
#: Speed targets of one store, by (row key, store).
TARGETS = {
    ("enqueue_single", "redis"): 10_000,
    ("enqueue_bulk", "redis"): 50_000,
    ("enqueue_bulk", "postgresql"): 30_000,
    ("drain_2", "redis"): 12_000,
    ("drain_2", "postgresql"): 3000,
    ("drain_2", "sqlite"): 2000,
    ("latency_p50", "redis"): 2,
    ("latency_p99", "redis"): 10,
    ("latency_p50", "postgresql"): 5,
    ("recovery_s", "redis"): 10,
    ("recovery_s", "postgresql"): 10,
    ("recovery_block_ms", "redis"): 50,
    ("recovery_block_ms", "postgresql"): 50,
    ("rss", "sqlite"): 60,
    ("rss", "postgresql"): 60,
    ("rss", "redis"): 60,
    ("bytes_queued", "redis"): 1024 + measures.PAYLOAD_BYTES,
    ("bytes_completed", "redis"): 1024 + measures.PAYLOAD_BYTES,
}
#: Speed targets between stores: (row key, store) within factor × (row key, other store).
#: (Worker RSS ≤ 60 MB a store is in TARGETS; every figure within 20% at scale: ``--scale``.)
VERSUS = {("latency_p50", "postgresql"): ("redis", 2.0)}

Sample = dict[str, float]


def log(text: str) -> None:
    print(f"# {text}", file=sys.stderr, flush=True)


class Bench:
    """Runs the groups for each store and collects the rows."""

    def __init__(self, args: argparse.Namespace, stores: FreshStores) -> None:
        self.args = args
        self.stores = stores
        self.rows: list[Row] = []
        self._empty: dict[tuple[str, str], Row] = {}

    # ------------------------------------------------------------- plumbing
    def _rows(self, kind: str, scale: bool, specs: dict[str, tuple[str, str, str]]) -> dict[str, Row]:
        """Rows for ``specs`` (key -> metric, configuration, unit), in table order."""
        out = {}
        for key, (metric, config, unit) in specs.items():
            if scale:
                metric = f"{metric} @{self.args.scale_jobs:,} finished"
                row = Row(metric, kind, config, unit, key=key, scale=True)
                row.baseline = self._empty.get((key, kind))
            else:
                row = Row(metric, kind, config, unit, key=key, target=TARGETS.get((key, kind)))
                self._empty[(key, kind)] = row
            self.rows.append(row)
            out[key] = row
        return out

    def _repeat(self, label: str, rows: dict[str, Row], once: Callable[[], Sample]) -> None:
        """Run ``once`` --runs times; each returns figures by row key (a key may
        be missing). The first failure marks the rows and stops the repeats."""
        for run in range(1, self.args.runs + 1):
            t0 = time.perf_counter()
            try:
                sample = once()
            except Exception as exc:  # reported in the table; the other groups still run
                text = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
                log(f"{label} run {run}: FAILED {text}")
                for row in rows.values():
                    row.error = text
                return
            for key, value in sample.items():
                rows[key].samples.append(value)
            figures = ", ".join(f"{k} {v:,.1f}" for k, v in sample.items())
            log(f"{label} run {run}/{self.args.runs}: {figures} ({time.perf_counter() - t0:.1f} s)")

    def _on_store(self, kind: str, shared: str | None, fn: Callable[[str], Sample]) -> Callable[[], Sample]:
        """``fn`` on the ``shared`` store URL, or on a fresh store of ``kind``."""

        def once() -> Sample:
            if shared is not None:
                return fn(shared)
            with self.stores.fresh(kind) as url:
                return fn(url)

        return once

    # --------------------------------------------------------------- groups
    def enqueue(self, kind: str, shared: str | None = None) -> None:
        a = self.args
        rows = self._rows(
            kind,
            shared is not None,
            {
                "enqueue_single": ("enqueue, single", f"enqueue() ×{a.single:,}, 1 client thread", "jobs/s"),
                "enqueue_threads": (
                    "enqueue, single",
                    f"enqueue() ×{a.single:,}, {a.threads} client threads",
                    "jobs/s",
                ),
                "enqueue_bulk": ("enqueue, bulk", f"enqueue_many() 1,000 a call ×{a.bulk:,}", "jobs/s"),
            },
        )

        def fn(url: str) -> Sample:
            with open_store(url) as store:
                return {
                    "enqueue_single": measures.enqueue_single(store, a.single),
                    "enqueue_threads": measures.enqueue_single(store, a.single, a.threads),
                    "enqueue_bulk": measures.enqueue_bulk(store, a.bulk),
                }

        self._repeat(f"{kind} enqueue", rows, self._on_store(kind, shared, fn))

    def drain(self, kind: str, shared: str | None = None) -> None:
        a = self.args
        specs = {
            f"drain_{p}": (
                "drain",
                f"{p} worker proc{'s' if p > 1 else ''} ×{a.concurrency} threads, {a.drain_jobs:,} jobs",
                "jobs/s",
            )
            for p in (1, 2)
        }
        if shared is None:
            specs["rss"] = ("worker peak RSS", "per process, in the drain runs above", "MB")
        rows = self._rows(kind, shared is not None, specs)
        for procs in (1, 2):

            def fn(url: str, procs: int = procs) -> Sample:
                result = throughput(url, a.drain_jobs, procs, a.concurrency)
                if "rss" in rows:
                    rows["rss"].samples.extend(result.peak_rss_mb)
                return {f"drain_{procs}": result.rate}

            self._repeat(f"{kind} drain {procs} procs", rows, self._on_store(kind, shared, fn))

    def latency(self, kind: str, shared: str | None = None) -> None:
        a = self.args
        config = f"1 idle worker, {a.latency_jobs} jobs one at a time, 0–{a.gap_ms:g} ms apart"
        rows = self._rows(
            kind,
            shared is not None,
            {"latency_p50": ("latency p50", config, "ms"), "latency_p99": ("latency p99", config, "ms")},
        )

        def fn(url: str) -> Sample:
            ms = latency(url, a.latency_jobs, a.concurrency, a.gap_ms)
            cuts = statistics.quantiles(ms, n=100, method="inclusive")
            return {"latency_p50": cuts[49], "latency_p99": cuts[98]}

        self._repeat(f"{kind} latency", rows, self._on_store(kind, shared, fn))

    def recovery(self, kind: str) -> None:
        a = self.args
        n = f"{a.recovery_jobs:,} expired leases"
        unit = "script call" if kind == "redis" else "batch"
        rows = self._rows(
            kind,
            False,
            {
                "recovery_s": ("recovery", f"{n}, recover_expired() until none left", "s"),
                "recovery_block_ms": ("recovery, longest block", f"{n}, longest {unit}", "ms"),
            },
        )
        slowlog: list[str] = []
        capped: list[str] = []

        def fn(url: str) -> Sample:
            with open_store(url) as store:
                r = measures.recovery(store, a.recovery_jobs, a.recovery_cap)
            if r.capped:
                capped.append(f"{r.done:,}")
            if kind == "redis":
                slowlog.append("none" if r.slowlog_ms is None else f"{r.slowlog_ms:.1f} ms")
            return {"recovery_s": r.total_s, "recovery_block_ms": r.longest_ms}

        self._repeat(f"{kind} recovery", rows, self._on_store(kind, None, fn))
        if capped:
            rows["recovery_s"].notes.append(
                f"{kind}: {len(capped)} run(s) stopped at the {a.recovery_cap:g} s cap, after "
                f"{' / '.join(capped)} of {a.recovery_jobs:,} jobs; their totals are projected at that rate"
            )
        if slowlog:
            rows["recovery_block_ms"].notes.append(
                "Redis SLOWLOG, longest entry of the run above slowlog-log-slower-than: " + ", ".join(slowlog)
            )

    def bytes(self, kind: str) -> None:
        a = self.args
        what = {
            "redis": "MEMORY USAGE of its keys + shared",
            "postgresql": "tables + indexes",
            "sqlite": "pages in use",
        }[kind]
        config = f"{a.bytes_jobs:,} jobs, {measures.PAYLOAD_BYTES} B payload, {what}"
        rows = self._rows(
            kind,
            False,
            {
                "bytes_queued": ("store bytes per job, queued", config, "B"),
                "bytes_completed": ("store bytes per job, completed", config, "B"),
            },
        )

        def fn(url: str) -> Sample:
            with open_store(url) as store:
                queued, completed = measures.bytes_per_job(store, a.bytes_jobs)
            return {"bytes_queued": queued, "bytes_completed": completed}

        self._repeat(f"{kind} bytes", rows, self._on_store(kind, None, fn))

    def versus(self) -> None:
        """Rows for VERSUS: the same samples, held to a multiple of another store's median."""
        empty = self._empty
        for (key, kind), (other, factor) in VERSUS.items():
            if (key, kind) in empty and (key, other) in empty:
                mine = empty[(key, kind)]
                row = Row(
                    mine.metric, kind, f"{mine.config}; against {other} in this run", mine.unit, key=key
                )
                row.samples, row.error = mine.samples, mine.error
                row.versus, row.factor = empty[(key, other)], factor
                self.rows.append(row)

    def scale(self, kind: str) -> None:
        """Load ``--scale-jobs`` finished jobs into one store, then repeat the
        SCALE_GROUPS on it."""
        with self.stores.fresh(kind) as url:
            with open_store(url) as store:
                log(f"{kind}: loading {self.args.scale_jobs:,} finished jobs")
                seconds = load_finished(store, self.args.scale_jobs)
                log(f"{kind}: loaded in {seconds:.1f} s")
            for group in SCALE_GROUPS:
                if group in self.args.metrics:
                    getattr(self, group)(kind, shared=url)


def header(args: argparse.Namespace) -> list[str]:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    sizes = (
        f"runs {args.runs}; enqueue {args.single:,} single / {args.bulk:,} bulk; drain {args.drain_jobs:,} "
        f"jobs, --concurrency {args.concurrency}; latency {args.latency_jobs} jobs; recovery "
        f"{args.recovery_jobs:,} (cap {args.recovery_cap:g} s); bytes {args.bytes_jobs:,} jobs"
    )
    if args.scale:
        sizes += f"; scale {args.scale_jobs:,} finished jobs"
    return [
        f"# Leasehold benchmarks, {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}",
        f"# command: {shlex.join([Path(sys.executable).name, *sys.argv])}",
        f"# machine: {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
        f"{platform.python_implementation()} {platform.python_version()}; load average at start {load}",
        f"# commit: {commit()}",
        "# stores: " + "; ".join(server_versions(args.stores).values()),
        f"# sizes: {sizes}",
        "# figures: median and min–max of the runs; 'met?' compares the median with the target "
        "or 17 (a store against another: PostgreSQL latency p50 ≤ 2× Redis's; --scale: within 20% of empty)",
    ]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default=",".join(KINDS), help="comma-separated: sqlite,postgresql,redis")
    parser.add_argument("--metrics", default=",".join(GROUPS), help="groups: " + ",".join(GROUPS))
    parser.add_argument("--runs", type=int, default=None, help="runs of each measurement (3; --quick: 1)")
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 run: a smoke run")
    parser.add_argument(
        "--scale", action="store_true", help="also with --scale-jobs finished jobs in the store"
    )
    parser.add_argument("--threads", type=int, default=4, help="client threads of the threaded enqueue")
    parser.add_argument("--concurrency", type=int, default=8, help="worker threads per worker process")
    parser.add_argument("--json", type=Path, default=None, help="also write every sample to this file")
    for name, full in FULL.items():
        flag = "--" + name.replace("_", "-")
        parser.add_argument(
            flag, type=type(full), default=None, help=f"default {full:,} ({QUICK[name]:,} quick)"
        )
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    for name, value in sizes.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.runs is None:
        args.runs = 1 if args.quick else 3
    args.stores = [s for s in args.stores.split(",") if s]
    args.metrics = [m for m in args.metrics.split(",") if m]
    for kind in args.stores:
        if kind not in KINDS:
            parser.error(f"unknown store {kind!r}; pick from {','.join(KINDS)}")
    for group in args.metrics:
        if group not in GROUPS:
            parser.error(f"unknown group {group!r}; pick from {','.join(GROUPS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    lines = header(args)
    print("\n".join(lines), flush=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lh-bench-") as tmp:
        stores = FreshStores(Path(tmp))
        bench = Bench(args, stores)
        try:
            for kind in args.stores:
                for group in GROUPS:
                    if group in args.metrics:
                        getattr(bench, group)(kind)
                if args.scale:
                    bench.scale(kind)
            bench.versus()
        finally:
            stores.close()
    # By metric, then store; the rows at scale after all the others.
    keys = list(dict.fromkeys(r.key for r in bench.rows))
    rows = sorted(bench.rows, key=lambda r: (r.scale, keys.index(r.key), KINDS.index(r.store)))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print()
    print(table(rows))
    print()
    print(f"# took {(time.perf_counter() - t0) / 60:.1f} min; load average at end {load}", flush=True)
    if args.json:
        data = [
            {"metric": r.metric, "store": r.store, "config": r.config, "unit": r.unit, "samples": r.samples,
             "median": r.median, "target": r.target, "met": r.met(), "error": r.error, "notes": r.notes}
            for r in rows
        ]  # fmt: skip
        args.json.write_text(json.dumps({"header": lines, "rows": data}, indent=2))
    return 1 if any(r.error for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
