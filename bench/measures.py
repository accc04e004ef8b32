"""In-process measurements on one open store, for any kind of store:
enqueue (single and bulk), recovery of expired leases, bytes per job.

Each function checks what it did (every job enqueued is counted, every
expired lease recovered) and raises AssertionError when it did not. The
drain and latency measurements, which need worker processes, are in
``bench/worker_throughput.py``.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from bench.redis_store import PAYLOAD, slowlog_of, timed_script
from store import JobStore
from store.base import MAX_BATCH
from store.lifecycle import JobStatus
from store.models import JobSpec

#: Queue of the enqueue measurements: no bench worker claims from it, so in a
#: store shared by several measurements (``--scale``) those jobs stay put.
ENQUEUE_QUEUE = "bench-enqueue"
#: Bytes of PAYLOAD as the stores keep it (JSON).
PAYLOAD_BYTES = len(orjson.dumps(PAYLOAD))


def _queued(store: JobStore, queue: str) -> int:
    return store.counts().by_queue.get(queue, {}).get("Queued", 0)


def enqueue_single(store: JobStore, jobs: int, threads: int = 1) -> float:
    """Jobs/s of ``store.enqueue`` one job a call, from ``threads`` client
    threads sharing the store handle (each enqueues ``jobs / threads``)."""
    before = _queued(store, ENQUEUE_QUEUE)
    per_thread = [jobs // threads + (1 if i < jobs % threads else 0) for i in range(threads)]
    errors: list[BaseException] = []

    def client(n: int) -> None:
        try:
            for _ in range(n):
                store.enqueue("noop", PAYLOAD, queue=ENQUEUE_QUEUE)
        except BaseException as exc:  # reported by the caller
            errors.append(exc)

    workers = [threading.Thread(target=client, args=(n,)) for n in per_thread]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    added = _queued(store, ENQUEUE_QUEUE) - before
    assert added == jobs, f"{added} of {jobs} jobs enqueued"
    return jobs / elapsed


def enqueue_bulk(store: JobStore, jobs: int, chunk: int = MAX_BATCH) -> float:
    """Jobs/s of ``store.enqueue_many`` with ``chunk`` jobs a call."""
    before = _queued(store, ENQUEUE_QUEUE)
    spec = JobSpec("noop", PAYLOAD, queue=ENQUEUE_QUEUE)
    t0 = time.perf_counter()
    for i in range(0, jobs, chunk):
        store.enqueue_many([spec] * min(chunk, jobs - i))
    elapsed = time.perf_counter() - t0
    added = _queued(store, ENQUEUE_QUEUE) - before
    assert added == jobs, f"{added} of {jobs} jobs enqueued"
    return jobs / elapsed


# ---------------------------------------------------------------- recovery
@dataclass(frozen=True)
class RecoveryResult:
    """total_s: time to recover ``done`` of ``jobs`` expired leases (when
    ``capped``, the time projected for all of them at the rate reached);
    longest_ms: the longest single unit that blocks the store (Redis: one
    script call, client-timed; SQL: one batch transaction); slowlog_ms: the
    longest Redis SLOWLOG entry of the run (None: none above the threshold,
    or not Redis)."""

    jobs: int
    done: int
    batches: int
    batch_size: int
    total_s: float
    longest_ms: float
    slowlog_ms: float | None
    capped: bool


def make_expired(store: JobStore, jobs: int) -> None:
    """``jobs`` InProgress jobs whose leases have expired, made the fast way:
    ``enqueue_many``, ``claim`` with a 5 s lease, then the store's clock moved
    10 s on (``clock_offset_s``, as the tests do)."""
    for i in range(0, jobs, MAX_BATCH):
        store.enqueue_many([("noop", None)] * min(MAX_BATCH, jobs - i))
    claimed = 0
    while claimed < jobs:
        got = store.claim("bench-dead", ["default"], MAX_BATCH, lease_ttl_s=5)
        assert got, f"only {claimed} of {jobs} jobs could be claimed"
        claimed += len(got)
    store.clock_offset_s += 10
    expired = store.expired_lease_count()
    assert expired == jobs, f"{expired} expired leases, expected {jobs}"


def recovery(store: JobStore, jobs: int, cap_s: float) -> RecoveryResult:
    """Recover ``jobs`` expired leases with ``recover_expired`` batches of the
    store's default size (settings.recovery_batch) until none is left, as the
    recovery service drains at start. Stops after ``cap_s`` seconds (the
    result is then ``capped``). Checks every job was rescheduled."""
    make_expired(store, jobs)
    redis_client = None
    scripts: list[float] = []
    if hasattr(store, "_lua"):  # the Redis store: time every script call
        import redis

        scripts = timed_script(store)  # type: ignore[arg-type]
        redis_client = redis.Redis.from_url(store.url.split("?", 1)[0])  # type: ignore[attr-defined]
    since = int(time.time())
    batches: list[float] = []
    done = 0
    t0 = time.perf_counter()
    try:
        while time.perf_counter() - t0 < cap_s:
            report = store.recover_expired(owner="bench-recovery")
            got = len(report.recovered) + len(report.failed)
            if not got and not report.more:
                break
            done += got
            batches.append(report.duration_ms)
        elapsed = time.perf_counter() - t0
        capped = done < jobs
        if not capped:
            scheduled = store.counts().by_status["Scheduled"]
            assert done == jobs and scheduled == jobs, f"recovered {done}, Scheduled {scheduled} of {jobs}"
        slow = None
        if redis_client is not None:
            entries = slowlog_of(redis_client, store.keys.prefix, since)  # type: ignore[attr-defined]
            slow = max(entries) / 1000 if entries else None
    finally:
        if redis_client is not None:
            redis_client.close()
    longest = max(scripts) * 1000 if scripts else max(batches, default=0.0)
    total = elapsed * jobs / done if capped and done else elapsed
    return RecoveryResult(
        jobs, done, len(batches), store.settings.recovery_batch, total, longest, slow, capped
    )


# ----------------------------------------------------------- bytes per job
def store_size(store: JobStore, ids: Iterable[str] = ()) -> int:
    """Bytes the store's data takes. Redis: MEMORY USAGE summed over the
    hash and event list of each job of ``ids`` and every shared key of the
    deployment (indexes, counters; queue ``default`` and the first job's name); PostgreSQL:
    pg_total_relation_size of the job, event and counter tables (indexes and
    TOAST included); SQLite: the pages in use (page_count - freelist_count,
    WAL included)."""
    url: str = store.url  # type: ignore[attr-defined]
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.split("///", 1)[1])
        try:
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            free = conn.execute("PRAGMA freelist_count").fetchone()[0]
            size = conn.execute("PRAGMA page_size").fetchone()[0]
        finally:
            conn.close()
        return (pages - free) * size
    if url.startswith("postgresql"):
        from sqlalchemy import create_engine, text

        engine = create_engine(url)
        try:
            with engine.connect() as conn:
                from store.sql.schema import counters, job_events, jobs

                q = "SELECT " + " + ".join(
                    f"pg_total_relation_size('{t.name}')" for t in (jobs, job_events, counters)
                )
                return int(conn.execute(text(q)).scalar_one())
        finally:
            engine.dispose()
    import redis

    k, ids = store.keys, list(ids)  # type: ignore[attr-defined]
    keys = [*k.common(), k.idempotency, k.ready("default"), k.scheduled("default"), k.queue_names]
    names = {store.get(job_id).name for job_id in ids[:1]}  # the bench's jobs share one name
    keys += [k.by_queue(s, "default") for s in JobStatus] + [
        k.by_name(s, n) for s in JobStatus for n in names
    ]
    keys += [key for job_id in ids for key in (k.job(job_id), k.events(job_id))]
    client = redis.Redis.from_url(url.split("?", 1)[0])
    try:
        total = 0
        for i in range(0, len(keys), 1000):
            pipe = client.pipeline(transaction=False)
            for key in keys[i : i + 1000]:
                pipe.memory_usage(key, samples=0)
            total += sum(n or 0 for n in pipe.execute())
        return total
    finally:
        client.close()


def bytes_per_job(store: JobStore, jobs: int) -> tuple[float, float]:
    """Bytes per job of ``jobs`` jobs with PAYLOAD, (queued, completed): the
    growth of ``store_size`` after ``enqueue_many``, then after claiming
    them and acking with ``complete_many`` (a small result, 3 events a job).
    PostgreSQL's figure includes the dead row versions the updates leave
    until vacuum reuses them."""
    before = store_size(store)
    ids: list[str] = []
    for i in range(0, jobs, MAX_BATCH):
        ids += [j.id for j in store.enqueue_many([JobSpec("noop", PAYLOAD)] * min(MAX_BATCH, jobs - i))]
    queued = (store_size(store, ids) - before) / jobs
    done = 0
    while batch := store.claim("bench-bytes", ["default"], MAX_BATCH):
        acks: list[tuple[str, int, Any]] = [
            (j.id, j.lease_token, {"worker": "bench-bytes", "token": j.lease_token, "attempt": 0})
            for j in batch
        ]
        done += sum(
            1 for r in store.complete_many(acks, worker_id="bench-bytes") if not isinstance(r, Exception)
        )
    assert done == jobs, f"{done} of {jobs} jobs completed"
    completed = (store_size(store, ids) - before) / jobs
    return queued, completed
