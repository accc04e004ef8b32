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
from store.counters import HISTORY_WIDTHS
from store.lifecycle import JobStatus
from store.models import Job
from store.redis.keys import LISTING_BY, parse_history_field
from store.redis.layout import layout_key
from store.redis.listing import stamp
from store.redis.store import RedisStore
from store.redis.upgrade import stale_keys, upgrade
from tests.backends import BACKENDS, delete_redis_prefix, redis_url_with_prefix
from tests.store.helpers import expire_leases
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
            "upgraded the key layout from version 1 to 3 (1 jobs indexed, 5 old indexes removed)"
        )
    finally:
        close()
    assert not any(store._client.exists(key) for key in stale_keys(store))
    again = upgrade(store)  # idempotent: nothing left to do
    assert again == {
        "indexed": 0,
        "removed": 0,
        "counters_removed": 0,
        "history_fields_moved": 0,
        "leases_rescored": 0,
    }

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


def _as_layout_2(store: RedisStore) -> None:
    """Rewrite the store's counts and lease scores as layout 2 kept them:
    status counters, ``e:`` totals of every kind (the history kinds' with
    ``extra`` events counted before the per-queue totals existed), hour
    buckets written with the minutes (the current hour's too), lease scores
    in float seconds, no roll-up mark, version "2"."""
    c, k = store._client, store.keys
    rows = dict(store._counter_rows())
    for key in [key for key in rows if key.startswith("e:")]:
        c.hset(k.counters, key, int(rows[key]) + (EXTRA if key == "e:enqueued" else 0))
    for key in [key for key in rows if key.startswith("s:")]:
        c.hset(k.counters, key, rows[key])
    minutes, hours = k.history(60), k.history(3600)
    c.delete(*hours, k._key("history_rolled", "3600"))
    for field, n in c.hgetall(minutes[0]).items():
        bucket, queue, kind = parse_history_field(field)
        hour = bucket // 3600 * 3600
        member = f"{hour:.17g}|{queue}|{kind}"  # as lib/job.lua's fmt wrote it
        c.hincrby(hours[0], member, int(n))
        c.zadd(hours[1], {member: hour})
    for job_id, score in c.zrange(k.leases, 0, -1, withscores=True):
        c.zadd(k.leases, {job_id: score / 1_000_000})
    c.set(layout_key(store), "2")


EXTRA = 5


def test_upgrade_from_layout_2_keeps_counts_history_and_leases(url_and_store: tuple[str, RedisStore]) -> None:
    url, store = url_and_store
    since = store.now() - 7200
    for queue in ("a", "a", "b", "b", "b"):
        store.enqueue("old", queue=queue, max_retries=0)
    [done, failing] = store.claim("w-old", ["a"], 2)
    store.complete(done.id, done.lease_token, None, worker_id="w-old")
    store.fail(failing.id, failing.lease_token, {"type": "E", "message": "m"}, worker_id="w-old")
    store.clock_offset_s += 3600  # a second hour
    store.enqueue("old", queue="a")
    [running] = store.claim("w-old", ["b"], 1)
    reads = lambda: (  # noqa: E731
        store.counts(),
        {(w, q): store.history(w, since, queue=q) for w in HISTORY_WIDTHS for q in (None, "a", "b")},
        store.queue_event_counts(),
    )
    before, events = reads(), store.event_counts()
    _as_layout_2(store)

    invoke, close = make_cli(url)
    try:
        result = invoke("db", "upgrade")
        assert result.exit_code == 0, result.output
        assert result.stdout.startswith("upgraded the key layout from version 2 to 3")
    finally:
        close()
    fields = store._client.hkeys(store.keys.counters)
    assert not [f for f in fields if f.startswith("s:") or f in ("e:enqueued", "e:completed", "e:failed")]
    assert reads() == before
    assert store.event_counts() == {**events, "enqueued": events["enqueued"] + EXTRA}
    assert upgrade(store) == {
        "indexed": 0, "removed": 0, "counters_removed": 0, "history_fields_moved": 0, "leases_rescored": 0
    }  # fmt: skip
    assert reads() == before

    store.trim_history()  # rolls the first hour up: the same reads
    assert reads() == before
    new = store.enqueue("new", queue="b")
    [next_b] = store.claim("w-new", ["b"], 1)
    store.complete(running.id, running.lease_token, None, worker_id="w-old")
    assert store.counts().by_queue["b"] == {"Queued": 2, "InProgress": 1, "Completed": 1}
    expire_leases(store)
    assert store.expired_lease_count() == 1  # the lease taken after the upgrade, in microseconds
    assert {j.id for j in store.list_jobs(status=S.InProgress).items} == {next_b.id}
    assert new.id != next_b.id  # FIFO: an old job first
    assert sum(store.history(3600, since, queue="b")["enqueued"].values()) == 4
