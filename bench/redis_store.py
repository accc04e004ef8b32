"""Redis store figures: enqueue, claim + complete, recovery at scale, memory per job.

    .venv/bin/python -m bench.redis_store [--single 2000] [--batches 20] [--jobs 20000]
                                          [--recovery 100000] [--claim-batch 100]

One process, one connection pool, against LEASEHOLD_TEST_REDIS_URL (default the
local server). Every section uses its own key prefix, deleted afterwards.

* enqueue: ``enqueue`` one job per call, then ``enqueue_many`` in batches of
  1000 (one script call per batch);
* claim + complete: ``claim(batch)`` then ``complete`` per job, and the same with
  one ``complete_many`` per batch;
* recovery: N leases claimed with a 5 s TTL, the store's clock moved 10 s on,
  then ``recover_expired`` in batches of MAX_BATCH until none is left. Each
  ``apply_failures.lua`` call is timed from the client (round trip included,
  so an upper bound of the time Redis is blocked); SLOWLOG entries of the
  prefix are reported too (Redis logs calls above ``slowlog-log-slower-than``);
* memory: ``MEMORY USAGE`` of one queued job's hash and event list, and the
  index bytes per job over 10,000 queued jobs.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import redis
from redis.utils import HIREDIS_AVAILABLE

from store import StoreSettings, open_store
from store.base import MAX_BATCH
from store.lifecycle import JobStatus
from store.redis.store import RedisStore
from tests.backends import REDIS_URL, delete_redis_prefix, redis_url_with_prefix

PAYLOAD = {"path": "src/app/module.py", "lines": 120}


def fresh_store() -> tuple[RedisStore, Callable[[], None]]:
    url, prefix = redis_url_with_prefix()
    store = open_store(url, StoreSettings())
    assert isinstance(store, RedisStore)

    def cleanup() -> None:
        store.close()
        delete_redis_prefix(url, prefix)

    return store, cleanup


def ms(values: list[float], q: float) -> float:
    """Quantile ``q`` of durations in seconds, as milliseconds."""
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1] * 1000


def latencies(values: list[float], digits: int) -> str:
    return f"p50 {ms(values, 0.5):.{digits}f} ms  p99 {ms(values, 0.99):.{digits}f} ms"


def timed_script(store: RedisStore, script: Any = None) -> list[float]:
    """Record the duration (s) of every call of ``script`` (None: of every
    script) made through the store, measured by the client (round trip
    included: an upper bound of the time Redis was blocked)."""
    durations: list[float] = []
    call = store._eval

    def timed(s: Any, keys: list[str], args: list[Any]) -> Any:
        t0 = time.perf_counter()
        try:
            return call(s, keys, args)
        finally:
            if script is None or s is script:
                durations.append(time.perf_counter() - t0)

    store._eval = timed  # type: ignore[method-assign]
    return durations


def bench_enqueue(single: int, batches: int) -> None:
    store, cleanup = fresh_store()
    try:
        lat = []
        t0 = time.perf_counter()
        for i in range(single):
            t = time.perf_counter()
            store.enqueue("noop", {**PAYLOAD, "i": i})
            lat.append(time.perf_counter() - t)
        rate = single / (time.perf_counter() - t0)
        print(f"enqueue, one per call       {rate:>10,.0f} jobs/s   {latencies(lat, 2)}")
        lat = []
        t0 = time.perf_counter()
        for b in range(batches):
            t = time.perf_counter()
            store.enqueue_many([("noop", {**PAYLOAD, "i": b * 1000 + i}) for i in range(1000)])
            lat.append(time.perf_counter() - t)
        rate = batches * 1000 / (time.perf_counter() - t0)
        print(f"enqueue_many, 1000 a call   {rate:>10,.0f} jobs/s   {latencies(lat, 1)} per batch")
    finally:
        cleanup()


def drain(store: RedisStore, batch: int, many: bool) -> float:
    """Claim ``batch`` at a time and ack until the queue is empty; jobs/s."""
    done, t0 = 0, time.perf_counter()
    while jobs := store.claim("bench", ["default"], batch):
        if many:
            store.complete_many([(j.id, j.lease_token, None) for j in jobs], worker_id="bench")
        else:
            for j in jobs:
                store.complete(j.id, j.lease_token, None, worker_id="bench")
        done += len(jobs)
    return done / (time.perf_counter() - t0)


def bench_claim(jobs: int, batch: int) -> None:
    for many in (False, True):
        store, cleanup = fresh_store()
        try:
            store.enqueue_many([("noop", PAYLOAD)] * jobs)
            rate = drain(store, batch, many)
            assert store.counts().by_status["Completed"] == jobs
            how = "complete_many per batch" if many else "complete per job       "
            print(f"claim {batch} + {how} {rate:>10,.0f} jobs/s")
        finally:
            cleanup()


def slowlog_of(client: redis.Redis, prefix: str, since: float) -> list[int]:
    """Durations (µs) of SLOWLOG entries since ``since`` that touched ``prefix``."""
    entries = client.slowlog_get(128)
    return [
        int(e["duration"])
        for e in entries
        if e["start_time"] >= since and any(prefix in str(a) for a in e.get("command", b"").split()[:6])
    ]


def bench_recovery(n: int) -> None:
    store, cleanup = fresh_store()
    client = redis.Redis.from_url(REDIS_URL)
    try:
        for i in range(0, n, MAX_BATCH):
            store.enqueue_many([("noop", PAYLOAD)] * min(MAX_BATCH, n - i))
        claimed = 0
        while claimed < n:
            claimed += len(store.claim("dead", ["default"], MAX_BATCH, lease_ttl_s=5))
        store.clock_offset_s += 10
        assert store.expired_lease_count() == n
        applies = timed_script(store, store._lua.apply_failures)
        since = time.time()
        batches, recovered, t0 = 0, 0, time.perf_counter()
        while True:
            report = store.recover_expired(limit=MAX_BATCH, owner="bench")
            got = len(report.recovered) + len(report.failed)
            if not got and not report.more:
                break
            batches, recovered = batches + 1, recovered + got
        total = time.perf_counter() - t0
        assert recovered == n and store.counts().by_status["Scheduled"] == n
        slow = slowlog_of(client, store.keys.prefix, since)
        threshold = client.config_get("slowlog-log-slower-than")["slowlog-log-slower-than"]
        print(
            f"recover {n:,} expired leases: {total:.2f} s in {batches} batches of {MAX_BATCH} "
            f"({n / total:,.0f} jobs/s)"
        )
        print(
            f"  apply_failures.lua per call (client-timed, round trip incl.): "
            f"max {max(applies) * 1000:.1f} ms, p50 {ms(applies, 0.5):.1f} ms"
        )
        worst = f"max {max(slow) / 1000:.1f} ms" if slow else "none"
        print(f"  SLOWLOG entries of this run above {int(threshold) / 1000:g} ms: {len(slow)} ({worst})")
    finally:
        client.close()
        cleanup()


def bench_memory(jobs: int = 10_000) -> None:
    store, cleanup = fresh_store()
    client = redis.Redis.from_url(REDIS_URL)
    try:
        job = store.enqueue("index-source", PAYLOAD)
        k = store.keys
        job_hash = client.memory_usage(k.job(job.id), samples=0)
        events = client.memory_usage(k.events(job.id), samples=0)
        print(f"MEMORY USAGE of one queued job hash: {job_hash} bytes (payload {PAYLOAD})")
        print(f"  its event list (1 event): {events} bytes")
        store.enqueue_many([("index-source", PAYLOAD)] * (jobs - 1))
        q = JobStatus.Queued
        indexes = [k.ready("default"), k.by_queue(q, "default"), k.by_name(q, "index-source")]
        per_job = sum(client.memory_usage(key, samples=0) for key in indexes) / jobs
        print(f"  indexes (ready, Queued listings) per job over {jobs:,} jobs: {per_job:.0f} bytes")
        print(f"  total per queued job: ~{job_hash + events + per_job:.0f} bytes")
    finally:
        client.close()
        cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--single", type=int, default=2000, help="jobs enqueued one per call")
    parser.add_argument("--batches", type=int, default=20, help="enqueue_many batches of 1000")
    parser.add_argument("--jobs", type=int, default=20000, help="jobs for claim + complete")
    parser.add_argument("--claim-batch", type=int, default=100)
    parser.add_argument("--recovery", type=int, default=100_000, help="expired leases to recover")
    args = parser.parse_args()
    client = redis.Redis.from_url(REDIS_URL)
    server = client.info("server")
    client.close()
    settings = StoreSettings()
    parser_kind = "hiredis (C)" if HIREDIS_AVAILABLE else "pure Python (pip install hiredis for C)"
    print(f"# Redis {server['redis_version']} at {REDIS_URL}, one server")
    print(f"# redis-py {redis.__version__}, RESP parser: {parser_kind}")
    python = f"{platform.python_implementation()} {platform.python_version()}"
    print(f"# {python}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, one client process")
    print(
        f"# events kept per job {settings.events_per_job}, MAX_BATCH {MAX_BATCH}, "
        f"socket timeout 5 s, payload {len(str(PAYLOAD))} chars"
    )
    bench_enqueue(args.single, args.batches)
    bench_claim(args.jobs, args.claim_batch)
    bench_recovery(args.recovery)
    bench_memory()


if __name__ == "__main__":
    main()
