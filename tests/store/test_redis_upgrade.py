"""Upgrading a Redis store written by earlier layouts
(store/redis/upgrade.py, ``leasehold db upgrade``), then serving its old jobs
beside new ones.

The previous layout is made by hand from this one, as reindex's test does:
its jobs had no ``enqueued_as``/``run``/``claimed_from`` fields and their
enqueued, claimed and completed events were in their lists, and InProgress
jobs were also in ``updated:300`` and its three listing zsets, and every job
in the all-jobs ``updated`` zset."""

from __future__ import annotations

import json

import pytest

from store.lifecycle import EventKind, JobStatus
from store.models import Job
from store.redis.keys import LEX_LISTING_BY
from store.redis.layout import layout_key
from store.redis.listing import stamp
from store.redis.store import RedisStore
from store.redis.upgrade import stale_keys, upgrade
from tests.backends import BACKENDS
from tests.store.helpers import as_layout_5_hash, redis_status_ids
from tests.store.redis_layouts import as_layout_3, cli_upgrade

S = JobStatus
pytestmark = pytest.mark.skipif("redis" not in BACKENDS, reason="Redis not among the test backends")
NEW_FIELDS = ("enqueued_as", "run", "claimed_from", "completed_by")


def _event(at: str, kind: str, **fields: object) -> str:
    return json.dumps({"at": at, "kind": kind, **fields})


def _as_previous_layout(store: RedisStore, job: Job) -> None:
    """Rewrite ``job`` as the previous version wrote it."""
    c, k = store._client, store.keys
    h = as_layout_5_hash(store, job.id)
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
        for by in LEX_LISTING_BY:
            c.zadd(k.lex_listed(S.InProgress, by), {members[by]: 0})


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
    as_layout_3(store)
    left = [key for key in stale_keys(store) if store._client.exists(key)]
    assert len(left) == 9  # updated, updated:100, updated:300, three lex zsets each of InProgress and Queued

    assert cli_upgrade(url) == (
        "upgraded the key layout from version 1 to 7 (1 jobs indexed, 8 old indexes removed, 0 records moved)"
    )  # updated:100 went with its last member, which reindex took out
    assert not any(store._client.exists(key) for key in stale_keys(store))
    again = upgrade(store)  # idempotent: nothing left to do
    assert again == {
        "indexed": 0,
        "removed": 0,
        "counters_removed": 0,
        "history_fields_moved": 0,
        "leases_rescored": 0,
        "keyed": 0,
        "records_moved": 0,
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


def test_upgrade_from_layout_3_keeps_every_listing_and_count(url_and_store: tuple[str, RedisStore]) -> None:
    url, store = url_and_store
    for i in range(30):
        store.enqueue(f"n{i % 3}", queue=f"q{i % 4}", max_retries=0)
    for job in store.claim("w-old", ["q0", "q1"], 8)[:6]:
        store.complete(job.id, job.lease_token, None, worker_id="w-old")
    store.cancel(store.list_jobs(status=S.Queued, queue="q2").items[0].id)
    filters = [
        {"status": status, "queue": queue, "name": name}
        for status in (None, *S)
        for queue in (None, "q0", "q2")
        for name in (None, "n1")
    ]
    listings = lambda: [[j.id for j in store.list_jobs(limit=100, **f).items] for f in filters]  # noqa: E731

    def counted() -> list[int]:
        return [
            store.count_jobs(f["status"], queue=f["queue"], name=f["name"]) for f in filters if f["status"]
        ]

    before, counts_before, numbers = listings(), counted(), store.counts()
    as_layout_3(store)
    store._client.set(layout_key(store), "3")
    assert store.list_jobs(status=S.Queued, queue="q2").items == []  # not readable before the upgrade

    assert cli_upgrade(url) == (
        "upgraded the key layout from version 3 to 7 "
        "(28 jobs indexed, 9 old indexes removed, 0 records moved)"
    )
    assert (listings(), counted(), store.counts()) == (before, counts_before, numbers)
    assert upgrade(store)["indexed"] == 0
    [job] = store.claim("w-new", ["q2"], 1)  # the oldest Queued job of q2 first, as before
    assert job.id == before[filters.index({"status": S.Queued, "queue": "q2", "name": None})][-1]
    store.complete(job.id, job.lease_token, None, worker_id="w-new")
    assert store.count_jobs(S.Completed, queue="q2") == 1
    assert job.id not in [j.id for j in store.list_jobs(status=S.Queued, queue="q2").items]


def test_upgrade_from_layout_4_drops_the_zsets_of_a_status_alone(
    url_and_store: tuple[str, RedisStore],
) -> None:
    """Layout 4 kept ``updated:<status>`` (score µs, member id) beside the
    zsets by queue and name; the upgrade removes them and every listing,
    count and purge reads the same as before."""
    url, store = url_and_store
    c, k = store._client, store.keys
    for i in range(12):
        store.enqueue("n", queue=f"q{i % 3}", max_retries=0)
    for job in store.claim("w", ["q0", "q1"], 4):
        store.complete(job.id, job.lease_token, None, worker_id="w")
    filters = [{"status": s, "queue": q} for s in (None, S.Queued, S.Completed) for q in (None, "q1")]
    listings = lambda: [[j.id for j in store.list_jobs(limit=100, **f).items] for f in filters]  # noqa: E731
    before = listings()
    counted = [store.count_jobs(S.Queued), store.count_jobs(S.Completed)]
    for status in (S.Queued, S.Completed):  # as layout 4 wrote them
        for job_id in redis_status_ids(store, status):
            score = c.zscore(k.by_queue(status, store.get(job_id).queue), job_id)
            c.zadd(k.updated(status), {job_id: score})
    c.set(layout_key(store), "4")

    assert cli_upgrade(url) == (
        "upgraded the key layout from version 4 to 7 (0 jobs indexed, 2 old indexes removed, 0 records moved)"
    )
    assert not c.exists(k.updated(S.Queued), k.updated(S.Completed))
    assert listings() == before
    assert [store.count_jobs(S.Queued), store.count_jobs(S.Completed)] == counted == [8, 4]
    assert store.count_purgeable(0) == 4
    assert store.purge(0, limit=3) == 3 and store.count_jobs(S.Completed) == 1
    assert upgrade(store)["removed"] == 0


def test_upgrade_from_layout_5_reads_full_and_lean_hashes_alike(
    url_and_store: tuple[str, RedisStore],
) -> None:
    """Layout 5 wrote ``id``, ``last_updated_at`` and ``due_at`` into every new
    job's hash and ``completed_by`` at every ack; layout 6 leaves them out
    where the key or another field says the same. After the upgrade (which
    only stamps the version) a job of either shape reads as it did, its
    timeline included, and listings, purges and new jobs work on both."""
    url, store = url_and_store
    c, k = store._client, store.keys
    old = [store.enqueue("n", queue="q") for _ in range(3)]
    [held] = store.claim("w", ["q"], 1)
    store.complete(held.id, held.lease_token, {"ok": 1}, worker_id="w")
    lean = {job.id: store.get(job.id) for job in old}
    timelines = {job.id: store.events(job.id) for job in old}
    for job in old:  # as layout 5 wrote them
        as_layout_5_hash(store, job.id)
    c.set(layout_key(store), "5")
    assert {job.id: store.get(job.id) for job in old} == lean
    assert {job.id: store.events(job.id) for job in old} == timelines

    assert cli_upgrade(url) == (
        "upgraded the key layout from version 5 to 7 (0 jobs indexed, 0 old indexes removed, 0 records moved)"
    )
    new = store.enqueue("n", queue="q")
    stored = c.hgetall(k.job(new.id))
    assert not {"id", "last_updated_at", "due_at"} & set(stored)
    assert store.get(new.id).last_updated_at == store.get(new.id).created_at == new.created_at
    assert {job.id: store.get(job.id) for job in old} == lean
    done = store.get(held.id)
    assert done.status is S.Completed and done.last_updated_at == done.completed_at
    assert [(e.kind, e.actor) for e in store.events(held.id)][-1] == (EventKind.COMPLETED.value, "w")
    queued = [j.id for j in store.list_jobs(status=S.Queued, queue="q").items]
    assert queued == [new.id, *[job.id for job in reversed(old) if job.id != held.id]]
    assert store.purge(0) == 1 and store.count_jobs(S.Completed) == 0


def test_a_hand_over_entry_of_layout_5_still_decodes(redis_store: RedisStore) -> None:
    """A hand-over list may hold entries a layout-5 library pushed (four
    values, the id in the hash) when the upgrade runs: they still decode."""
    from store.redis import codec

    job = redis_store.enqueue("n")
    flat = [*as_layout_5_hash(redis_store, job.id).items()]
    entry = json.dumps([[x for pair in flat for x in pair], "3", "1900000000.5", "1800000000.25"])
    got = codec.claimed_job(entry, "w")
    assert (got.id, got.lease_token, got.worker_id, got.status) == (job.id, 3, "w", S.InProgress)
    assert codec.claim_entry(entry)[0] == job.id
