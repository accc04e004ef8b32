"""The Redis listing zsets: what one status change writes, and the one-off
rebuild for jobs indexed by an earlier layout (store/redis/reindex.py)."""

from __future__ import annotations

import pytest

from store.lifecycle import JobStatus
from store.redis.reindex import reindex, unindexed
from store.redis.store import RedisStore
from tests.backends import BACKENDS
from tests.store.helpers import as_layout_5_hash, redis_status_ids

S = JobStatus
pytestmark = pytest.mark.skipif("redis" not in BACKENDS, reason="Redis not among the test backends")


def _as_seconds(store: RedisStore) -> None:
    """What an earlier layout left: ``updated:<status>`` scored in seconds,
    no zsets by queue or name."""
    c, k = store._client, store.keys
    for status in S:
        if status is S.InProgress:
            continue
        for job_id in redis_status_ids(store, status):
            h = as_layout_5_hash(store, job_id)
            c.zadd(k.updated(status), {job_id: float(h["last_updated_at"])})
            c.delete(k.by_queue(status, h["queue"]), k.by_name(status, h["name"]))
    c.delete(k.queue_names)


def test_reindex_indexes_jobs_of_an_earlier_layout(redis_store: RedisStore) -> None:
    jobs = [redis_store.enqueue("target", queue="rare") for _ in range(3)]
    redis_store.cancel(jobs[0].id)
    redis_store.enqueue_many([("other", None)] * 250)
    gone = redis_store.enqueue("gone")
    _as_seconds(redis_store)
    redis_store._client.delete(redis_store.keys.job(gone.id))  # a stale member: skipped and dropped
    assert redis_store.list_jobs(name="target").items == []
    assert unindexed(redis_store) == 254
    assert reindex(redis_store) == 253
    assert unindexed(redis_store) == 0
    assert [j.id for j in redis_store.list_jobs(name="target", queue="rare").items] == [
        jobs[0].id,
        jobs[2].id,
        jobs[1].id,
    ]
    assert [j.id for j in redis_store.list_jobs(status=S.Canceled, name="target").items] == [jobs[0].id]
    redis_store.cancel(jobs[1].id)  # moves out of the rebuilt Queued entries exactly
    assert [j.id for j in redis_store.list_jobs(status=S.Queued, queue="rare").items] == [jobs[2].id]
    assert redis_store.count_jobs(S.Queued) == 251
    assert reindex(redis_store) == 0  # idempotent


def test_a_status_change_moves_two_listing_entries(redis_store: RedisStore) -> None:
    job = redis_store.enqueue("target", queue="rare")
    c, k = redis_store._client, redis_store.keys

    def listed() -> set[str]:
        keys = {
            key: c.zscore(key, job.id)
            for s in S
            for key in (k.updated(s), k.by_queue(s, "rare"), k.by_name(s, "target"))
        }
        return {key for key, score in keys.items() if score is not None}

    queued = {k.by_queue(S.Queued, "rare"), k.by_name(S.Queued, "target")}
    assert listed() == queued  # no zset of a status alone (updated:<status>)
    score = c.zscore(k.by_queue(S.Queued, "rare"), job.id)
    assert score == round(job.last_updated_at.timestamp() * 1_000_000)
    assert c.smembers(k.queue_names) == {"rare"}
    redis_store.cancel(job.id)
    assert listed() == {k.by_queue(S.Canceled, "rare"), k.by_name(S.Canceled, "target")}
    redis_store.delete(job.id)
    assert listed() == set()
