"""Upgrading a Redis store written by the previous layout
(store/redis/upgrade.py, ``leasehold db upgrade``), then serving its old jobs
beside new ones.

The previous layout is made by hand from this one, as reindex's test does:
its jobs had no ``enqueued_as``/``run``/``claimed_from`` fields and their
enqueued, claimed and completed events were in their lists, and InProgress
jobs were also in ``updated:300`` and its three listing zsets, and every job
in the all-jobs ``updated`` zset."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from store import open_store
from store.lifecycle import JobStatus
from store.models import Job
from store.redis.keys import LISTING_BY
from store.redis.listing import stamp
from store.redis.store import RedisStore
from store.redis.upgrade import stale_keys, upgrade
from tests.backends import BACKENDS, delete_redis_prefix, redis_url_with_prefix
from tests.workers.test_cli import make_cli

S = JobStatus
pytestmark = pytest.mark.skipif("redis" not in BACKENDS, reason="Redis not among the test backends")
NEW_FIELDS = ("enqueued_as", "run", "claimed_from", "completed_by")


@pytest.fixture
def url_and_store() -> Iterator[tuple[str, RedisStore]]:
    url, prefix = redis_url_with_prefix()
    store = open_store(url)
    assert isinstance(store, RedisStore)
    yield url, store
    store.close()
    delete_redis_prefix(url, prefix)


def _event(at: str, kind: str, **fields: object) -> str:
    return json.dumps({"at": at, "kind": kind, **fields})


def _as_previous_layout(store: RedisStore, job: Job) -> None:
    """Rewrite ``job`` as the previous version wrote it."""
    c, k = store._client, store.keys
    h = c.hgetall(k.job(job.id))
    events = [_event(h["created_at"], "enqueued", to=int(h["enqueued_as"]), token=0)]
    if h.get("run"):
        token = int(h["lease_token"])
        events.append(
            _event(h["started_at"], "claimed", **{"from": int(h["claimed_from"]), "to": 300},
                   actor=h["worker_id"], token=token)
        )  # fmt: skip
    c.delete(k.events(job.id))
    c.rpush(k.events(job.id), *events)
    c.hdel(k.job(job.id), *NEW_FIELDS)
    c.zadd(k.updated(), {job.id: float(h["last_updated_at"])})
    if int(h["status"]) == S.InProgress:
        c.zadd(k.updated(S.InProgress), {job.id: float(h["last_updated_at"])})
        tail = f"{stamp(float(h['last_updated_at']))}:{job.id}"
        members = {"queue": f"{h['queue']}\0{tail}", "name": f"{h['name']}\0{tail}"}
        members["queue_name"] = f"{h['queue']}\0{h['name']}\0{tail}"
        for by in LISTING_BY:
            c.zadd(k.listed(S.InProgress, by), {members[by]: 0})


def _kinds(store: RedisStore, job_id: str) -> list[str]:
    return [e.kind for e in store.events(job_id)]


def test_upgrade_then_serve_old_and_new_jobs(url_and_store: tuple[str, RedisStore]) -> None:
    url, store = url_and_store
    waiting = store.enqueue("old", queue="up")
    running = store.enqueue("old", queue="up")
    [claimed] = store.claim("w-old", ["up"], 1)
    assert claimed.id == waiting.id  # FIFO: the first one runs
    running, waiting = claimed, store.get(running.id)
    for job in (waiting, running):
        _as_previous_layout(store, job)
    assert all(store._client.exists(key) for key in stale_keys(store))

    invoke, close = make_cli(url)
    try:
        result = invoke("db", "upgrade")
        assert result.exit_code == 0, result.output
        assert result.stdout.strip() == (
            "upgraded the key layout from version 1 to 2 (1 jobs indexed, 5 old indexes removed)"
        )
    finally:
        close()
    assert not any(store._client.exists(key) for key in stale_keys(store))
    assert upgrade(store) == {"indexed": 1, "removed": 0}  # idempotent (the running job needs none)

    assert [j.id for j in store.list_jobs(status=S.InProgress, queue="up").items] == [running.id]
    assert store.count_jobs(S.InProgress, name="old", queue="up") == 1
    store.complete(running.id, running.lease_token, {"ok": 1}, worker_id="w-old")
    assert _kinds(store, running.id) == ["enqueued", "claimed", "completed"]
    assert store.list_jobs(status=S.InProgress, queue="up").items == []

    new = store.enqueue("new", queue="up")
    jobs = store.claim("w-new", ["up"], 2)
    assert [j.id for j in jobs] == [waiting.id, new.id]
    for job in jobs:
        store.complete(job.id, job.lease_token, None, worker_id="w-new")
        assert _kinds(store, job.id) == ["enqueued", "claimed", "completed"]
    old_timeline = store.events(waiting.id)
    assert (old_timeline[1].actor, old_timeline[1].from_status) == ("w-new", S.Queued)
    done = store.list_jobs(status=S.Completed, queue="up").items
    assert {j.id for j in done} == {running.id, waiting.id, new.id}
    assert store.counts().by_queue["up"] == {"Completed": 3}
