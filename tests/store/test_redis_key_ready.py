"""The Redis store's per-key ready sets (lua/lib/ready.lua, store/redis/keys.py
``key_ready``, ``key_heads``, ``keyed``) stay exact whichever way a job with a
limit key becomes ready or leaves ready, and are gone when the queue drains;
an upgrade from layout 6 builds them for the jobs that waited."""

from __future__ import annotations

import pytest

from store.base import JobStore
from store.flow_rules import QueueLimits
from store.models import JobSpec
from store.redis.keys import rank_job_id
from store.redis.layout import LAYOUT_VERSION, layout_key
from store.redis.schema_upgrade import upgrade_layout
from store.redis.store import RedisStore
from tests.store.helpers import ERROR

KEYS = ("a", "b", "c")


def _redis(store: JobStore) -> RedisStore:
    if not isinstance(store, RedisStore):
        pytest.skip("the per-key ready sets are the Redis store's")
    return store


def _text(values) -> list[str]:
    return [v.decode() if isinstance(v, bytes) else v for v in values]


def _assert_exact(store: RedisStore, queue: str = "q") -> None:
    """Each key's set is the ready members of that key, key_heads their
    heads, keyed their union."""
    c, k = store._client, store.keys
    by_key: dict[str, list[str]] = {}
    for member in _text(c.zrange(k.ready(queue), 0, -1)):
        key = store.get(rank_job_id(member)).limit_key
        if key is not None:
            by_key.setdefault(key, []).append(member)
    for key in KEYS:
        assert _text(c.zrange(k.key_ready(queue, key), 0, -1)) == by_key.get(key, [])
    heads = sorted(members[0] for members in by_key.values())
    assert _text(c.zrange(k.key_heads(queue), 0, -1)) == heads
    assert _text(c.zrange(k.keyed(queue), 0, -1)) == sorted(m for ms in by_key.values() for m in ms)


def test_every_way_in_and_out_of_ready_keeps_the_sets_exact(store: JobStore) -> None:
    redis_store = _redis(store)
    store.set_queue_limits("q", QueueLimits(per_key_concurrency=1))
    specs = [JobSpec("t", {"i": i}, queue="q", limit_key=KEYS[i % 3], max_retries=2) for i in range(9)]
    jobs = store.enqueue_many([*specs, JobSpec("t", None, queue="q")])
    later = store.enqueue("t", None, queue="q", limit_key="a", delay_s=30)
    parent = store.enqueue("p", None, queue="p")
    child = store.enqueue("t", None, queue="q", limit_key="b", depends_on=[parent.id])
    _assert_exact(redis_store)
    store.cancel(jobs[0].id, actor="operator:ann")  # the head of key a
    store.delete(jobs[4].id, actor="operator:ann")  # inside key b
    _assert_exact(redis_store)
    claimed = store.claim("w", ["q"], 10)
    assert sorted(j.limit_key or "" for j in claimed) == ["", "a", "b", "c"]
    _assert_exact(redis_store)
    store.requeue(jobs[0].id, actor="operator:ann")
    failing = next(j for j in claimed if j.limit_key == "a")
    store.fail(failing.id, failing.lease_token, ERROR)  # retried: scheduled, promoted by a claim
    for j in claimed:
        if j is not failing:
            store.complete(j.id, j.lease_token, None)
    [p] = store.claim("w", ["p"], 1)
    store.complete(p.id, p.lease_token, None)  # the child becomes ready
    assert store.get(child.id).status.name == "Queued"
    _assert_exact(redis_store)
    store.clock_offset_s += 3600
    for _ in range(40):  # drain: claim and complete until nothing is left
        running = store.claim("w", ["q"], 10)
        _assert_exact(redis_store)
        for j in running:
            store.complete(j.id, j.lease_token, None)
        if not running:
            break
    assert store.get(later.id).status.name == "Completed"
    c, k = redis_store._client, redis_store.keys
    gone = [k.key_ready("q", key) for key in KEYS] + [k.key_heads("q"), k.keyed("q"), k.ready("q")]
    assert sum(c.exists(key) for key in gone) == 0


def test_an_upgrade_from_layout_6_builds_the_sets_of_waiting_jobs(store: JobStore) -> None:
    redis_store = _redis(store)
    c, k = redis_store._client, redis_store.keys
    hot = store.enqueue_many([JobSpec("t", {"i": i}, queue="q", limit_key="a") for i in range(1100)])
    cold = store.enqueue("t", None, queue="q", limit_key="b")
    free = store.enqueue("t", None, queue="q")
    for key in (k.key_ready("q", "a"), k.key_ready("q", "b"), k.key_heads("q"), k.keyed("q")):
        c.delete(key)  # as layout 6 left them: no per-key sets
    c.set(layout_key(redis_store), "6")
    assert upgrade_layout(redis_store)["keyed"] == 1101
    assert upgrade_layout(redis_store)["keyed"] == 0  # idempotent
    assert c.get(layout_key(redis_store)) in (LAYOUT_VERSION, LAYOUT_VERSION.encode())
    _assert_exact(redis_store)
    store.set_queue_limits("q", QueueLimits(per_key_concurrency=1))
    assert [j.id for j in store.claim("w", ["q"], 4)] == [hot[0].id, cold.id, free.id]


def test_a_job_a_layout_6_process_made_ready_keeps_its_key_limit(store: JobStore) -> None:
    """During a rolling upgrade a process of layout 6 makes a job with a key
    ready without its key's set: the claim still admits it by its key, and
    puts it in the set."""
    redis_store = _redis(store)
    c, k = redis_store._client, redis_store.keys
    store.set_queue_limits("q", QueueLimits(per_key_concurrency=1))
    jobs = store.enqueue_many([JobSpec("t", {"i": i}, queue="q", limit_key="a") for i in range(3)])
    for key in (k.key_ready("q", "a"), k.key_heads("q"), k.keyed("q")):
        c.delete(key)
    assert [j.id for j in store.claim("w", ["q"], 4)] == [jobs[0].id]
    _assert_exact(redis_store)
    assert store.claim("w", ["q"], 4) == []
