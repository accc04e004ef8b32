"""The Redis listing zsets: what one status change writes, and the one-off
rebuild for jobs written before the zsets existed (store/redis/reindex.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store import open_store
from store.lifecycle import JobStatus
from store.redis.keys import LISTING_BY
from store.redis.reindex import reindex
from store.redis.store import RedisStore
from tests.backends import BACKENDS, delete_redis_prefix, redis_url_with_prefix

S = JobStatus
pytestmark = pytest.mark.skipif("redis" not in BACKENDS, reason="Redis not among the test backends")


@pytest.fixture
def redis_store() -> Iterator[RedisStore]:
    url, prefix = redis_url_with_prefix()
    store = open_store(url)
    assert isinstance(store, RedisStore)
    yield store
    store.close()
    delete_redis_prefix(url, prefix)


def _forget_listing(store: RedisStore) -> None:
    """What a deployment upgraded from an older version looks like."""
    store._client.delete(*store.keys.listing())


def test_reindex_indexes_jobs_written_without_the_listing_zsets(redis_store: RedisStore) -> None:
    jobs = [redis_store.enqueue("target", queue="rare") for _ in range(3)]
    redis_store.cancel(jobs[0].id)
    redis_store.enqueue_many([("other", None)] * 250)
    _forget_listing(redis_store)
    assert redis_store.list_jobs(name="target").items == []
    assert reindex(redis_store) == 253
    assert [j.id for j in redis_store.list_jobs(name="target", queue="rare").items] == [
        jobs[0].id,
        jobs[2].id,
        jobs[1].id,
    ]
    assert [j.id for j in redis_store.list_jobs(status=S.Canceled, name="target").items] == [jobs[0].id]
    redis_store.cancel(jobs[1].id)  # moves out of the rebuilt Queued entry exactly
    assert [j.id for j in redis_store.list_jobs(status=S.Queued, queue="rare").items] == [jobs[2].id]
    assert reindex(redis_store) == 253  # idempotent


def test_a_status_change_writes_three_zrem_and_three_zadd_more(redis_store: RedisStore) -> None:
    job = redis_store.enqueue("target", queue="rare")
    k = redis_store.keys
    sizes = {(s, by): redis_store._client.zcard(k.listed(s, by)) for s in S for by in LISTING_BY}
    assert {key for key, n in sizes.items() if n} == {(S.Queued, by) for by in LISTING_BY}
    redis_store.cancel(job.id)
    sizes = {(s, by): redis_store._client.zcard(k.listed(s, by)) for s in S for by in LISTING_BY}
    assert {key for key, n in sizes.items() if n} == {(S.Canceled, by) for by in LISTING_BY}
    redis_store.delete(job.id)
    assert not any(redis_store._client.zcard(key) for key in k.listing())
