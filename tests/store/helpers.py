"""Helpers for the contract suite: put a job in any status through the contract."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from store.base import JobStore
from store.lifecycle import JobStatus
from store.models import Job

S = JobStatus
ERROR = {"type": "RuntimeError", "message": "boom", "traceback": None}


def job_in(store: JobStore, status: JobStatus, queue: str = "default", **options: object) -> Job:
    """Enqueue a job and move it to ``status`` with the store's own operations.

    For InProgress, Completed and Failed it claims every due job of ``queue``."""
    if status is S.Scheduled:
        return store.enqueue("t", {"s": status.name}, queue=queue, delay_s=3600, **options)
    job = store.enqueue("t", {"s": status.name}, queue=queue, **options)
    if status is S.Queued:
        return job
    if status is S.Canceled:
        return store.cancel(job.id)
    [claimed] = [j for j in store.claim("w-setup", [queue], limit=1000) if j.id == job.id]
    if status is S.InProgress:
        return claimed
    if status is S.Completed:
        return store.complete(job.id, claimed.lease_token, {"ok": True})
    if status is S.Failed:
        return store.fail(job.id, claimed.lease_token, ERROR, permanent=True)
    raise AssertionError(status)


def expire_leases(store: JobStore, seconds: float | None = None) -> None:
    """Move the store's clock past every lease granted so far (no sleeping)."""
    store.clock_offset_s += seconds if seconds is not None else store.settings.lease_ttl_s + 1


def redis_status_ids(store: JobStore, status: JobStatus) -> list[str]:
    """The ids a Redis store lists under ``status`` (not InProgress): the
    members of the status's listing zsets of every queue (store/redis/listing.py)."""
    shards = getattr(store, "shards", [store])  # a sharded store (store/redis/shards/): every shard's
    return [
        i
        for shard in shards
        for q in sorted(shard._client.smembers(shard.keys.queue_names))
        for i in shard._client.zrange(shard.keys.by_queue(status, q), 0, -1)
    ]


def as_layout_5_hash(store: JobStore, job_id: str) -> dict[str, str]:
    """Give the Redis hash of ``job_id`` the fields layouts 1 to 5 wrote and
    layout 6 leaves out (store/redis/layout.py): ``id``, ``last_updated_at``
    and ``due_at`` (``created_at`` when absent), ``completed_by`` of a job its
    lease holder acked (its ``worker_id``), ``last_heartbeat_at`` of a job
    that ran (its ``started_at``). Returns the hash."""
    client, key = store._client, store.keys.job(job_id)  # type: ignore[attr-defined]
    h = client.hgetall(key)
    full = {"id": job_id, "last_updated_at": h["created_at"], "due_at": h["created_at"]}
    if h.get("run") == "2" and h.get("worker_id"):
        full["completed_by"] = h["worker_id"]
    if h.get("started_at"):
        full["last_heartbeat_at"] = h["started_at"]
    added = {field: value for field, value in full.items() if field not in h}
    if added:
        client.hset(key, mapping=added)
    return {**h, **added}


def enqueue_five_while_the_first_is_held(
    store: JobStore, group: Any, hold: AbstractContextManager[object], first_started: Callable[[], object]
) -> dict[int, Job]:
    """Five threads each enqueue one job ``{"i": i}`` on ``store``: the
    first while ``hold`` is entered (its write waits until ``hold`` exits),
    once ``first_started()`` is true the other four, which queue on the
    store's GroupCommit ``group``. Returns each thread's job by ``i``, each
    checked to be its own and stored as returned."""
    from tests.workers.procs import wait_until

    got: dict[int, Job] = {}
    threads = [
        threading.Thread(target=lambda i=i: got.__setitem__(i, store.enqueue("t", {"i": i})))
        for i in range(5)
    ]
    with hold:
        threads[0].start()
        wait_until(first_started, timeout=10, what="the first write")
        for thread in threads[1:]:
            thread.start()
        wait_until(lambda: len(group._pending) == 4, timeout=10, what="four jobs waiting")
    for thread in threads:
        thread.join(10)
    assert sorted(got) == list(range(5))
    assert [got[i].payload for i in range(5)] == [{"i": i} for i in range(5)]
    assert all(store.get(job.id).payload == job.payload for job in got.values())
    return got
