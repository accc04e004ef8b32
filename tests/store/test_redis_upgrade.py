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
from collections.abc import Iterator

import pytest

from store import open_store
from store.bookings import failure_digest
from store.counters import HISTORY_WIDTHS
from store.lifecycle import EventKind, JobStatus
from store.models import Job
from store.redis.keys import LEX_LISTING_BY, parse_history_field
from store.redis.layout import layout_key
from store.redis.listing import stamp
from store.redis.store import RedisStore
from store.redis.upgrade import stale_keys, upgrade
from tests.backends import BACKENDS, delete_redis_prefix, redis_url_with_prefix
from tests.store.helpers import as_layout_5_hash, expire_leases, redis_status_ids
from tests.workers.test_cli import make_cli

S = JobStatus
pytestmark = pytest.mark.skipif("redis" not in BACKENDS, reason="Redis not among the test backends")
NEW_FIELDS = ("enqueued_as", "run", "claimed_from", "completed_by")
#: The first part of every layout-2 record key (store/redis/upgrade_records.py).
OLD_RECORD_KEYS = {"worker", "workers", "lock", "failure", "schedule", "schedules", "recovery_runs"}
OLD_RECORD_KEYS |= {"maintenance_runs", "operations"}


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


def _as_layout_3(store: RedisStore) -> None:
    """Rewrite the listing indexes as layouts 1 to 3 kept them: each
    ``updated:<status>`` scored in float seconds, lex zsets by queue, name
    and both (member ``<queue>\0<µs>:<id>`` ...), no zsets by queue or name
    and no ``queue_names``."""
    c, k = store._client, store.keys
    for status in S:
        if status is S.InProgress:
            continue
        for job_id in redis_status_ids(store, status):
            h = as_layout_5_hash(store, job_id)
            at = h["last_updated_at"]
            c.zadd(k.updated(status), {job_id: float(at)})
            tail = f"{stamp(float(at))}:{job_id}"
            members = {"queue": f"{h['queue']}\0{tail}", "name": f"{h['name']}\0{tail}"}
            members["queue_name"] = f"{h['queue']}\0{h['name']}\0{tail}"
            for by in LEX_LISTING_BY:
                c.zadd(k.lex_listed(status, by), {members[by]: 0})
            c.delete(k.by_queue(status, h["queue"]), k.by_name(status, h["name"]))
    c.delete(k.queue_names)


def _cli_upgrade(url: str) -> str:
    """``leasehold db upgrade`` on ``url`` through the command; its output
    (it must exit 0)."""
    invoke, close = make_cli(url)
    try:
        result = invoke("db", "upgrade")
        assert result.exit_code == 0, result.output
        return result.stdout.strip()
    finally:
        close()


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
    _as_layout_3(store)
    left = [key for key in stale_keys(store) if store._client.exists(key)]
    assert len(left) == 9  # updated, updated:100, updated:300, three lex zsets each of InProgress and Queued

    assert _cli_upgrade(url) == (
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


def _as_layout_2(store: RedisStore) -> None:
    """Rewrite the store's counts and lease scores as layout 2 kept them:
    status counters, ``e:`` totals of every kind (the history kinds' with
    ``extra`` events counted before the per-queue totals existed), hour
    buckets written with the minutes (the current hour's too), lease scores
    in float seconds, no roll-up mark, version "2"."""
    _as_layout_3(store)
    c, k = store._client, store.keys
    rows = dict(store._counter_rows())
    for kind, n in store.event_counts().items():
        c.hset(k.counters, f"e:{kind}", n + (EXTRA if kind == "enqueued" else 0))
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

    assert _cli_upgrade(url).startswith("upgraded the key layout from version 2 to 7")
    fields = store._client.hkeys(store.keys.counters)
    assert not [f for f in fields if f.startswith("s:") or f in ("e:enqueued", "e:completed", "e:failed")]
    assert reads() == before
    assert store.event_counts() == {**events, "enqueued": events["enqueued"] + EXTRA}
    assert upgrade(store) == {
        "indexed": 0, "removed": 0, "counters_removed": 0, "history_fields_moved": 0, "leases_rescored": 0,
        "keyed": 0, "records_moved": 0,
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


def _write_layout_2(store: RedisStore, now: float) -> None:
    """The records of layout 2 as its scripts wrote them (one key shape per
    feature): a worker with an operator's command, a held lock, a recovery
    run, a maintenance run, a disabled schedule with a tick, a failure
    window, a finished and an unfinished bulk operation."""
    c, p = store._client, store.keys.route
    c.hset(
        p + "worker:w-2",
        mapping={
            "id": "w-2",
            "host": "host-2",
            "pid": "77",
            "started_at": repr(now - 60),
            "queues": '["up"]',
            "concurrency": "4",
            "jobs_in_hand": "[]",
            "last_seen_at": repr(now - 1),
            "command": "quiet",
            "command_by": "operator:ann",
            "handlers": '[{"name": "old", "queue": "up"}]',
        },
    )
    c.zadd(p + "workers", {"w-2": now - 1})
    c.hset(p + "lock:recovery", mapping={"owner": "w-2", "expires_at": repr(now + 300)})
    run = {
        "id": "r-1",
        "started_at": now - 30,
        "finished_at": now - 29,
        "owner": "w-2",
        "trigger": "schedule",
    }
    run |= {"recovered": 2, "failed": 1, "duration_ms": 12.5}
    c.zadd(p + "recovery_runs", {json.dumps(run): now - 30})
    task = {"id": "m-1", "task": "retention", "started_at": now - 20, "finished_at": now - 19, "owner": "w-2"}
    task |= {"count": 9, "duration_ms": 3.0, "longest_batch_ms": 1.5}
    c.zadd(p + "maintenance_runs:retention", {json.dumps(task): now - 20})
    c.zadd(p + "schedules", {"nightly": 0})
    c.hset(
        p + "schedule:nightly",
        mapping={
            "name": "nightly",
            "handler": "old",
            "cron": "0 3 * * *",
            "timezone": "UTC",
            "queue": "up",
            "payload": '{"n": 1}',
            "catch_up": "0",
            "enabled": "0",
            "last_tick_at": repr(now - 3600),
            "last_job_id": "j-1",
        },
    )
    digest = failure_digest("ann|10.0.0.1")
    c.hset(p + "failure:" + digest, mapping={"n": "3", "window_end": repr(now + 600)})
    c.pexpire(p + "failure:" + digest, 600_000)
    for op_id, state, at in (("op-done", "done", now - 50), ("op-open", "running", now - 40)):
        record = {"id": op_id, "action": "cancel", "filter": [], "actor": "operator:ann", "expected": 5}
        record |= {"state": state, "changed": 2, "skipped": 0, "cursor": None, "error": None}
        record |= {"created_at": repr(at), "updated_at": repr(at + 1)}
        c.hset(p + "operations", op_id, json.dumps(record))
        c.zadd(p + "operations:created", {op_id: at})
        if state == "running":
            c.zadd(p + "operations:unfinished", {op_id: at})
    c.set(p + "layout", "2")


def test_layout_2_records_upgrade_with_everything_kept(url_and_store: tuple[str, RedisStore]) -> None:
    url, store = url_and_store
    store.record_action("operator:ann", EventKind.SCHEDULE_DISABLED, "schedule nightly")
    now = store.now()
    _write_layout_2(store, now)
    assert _cli_upgrade(url) == (
        "upgraded the key layout from version 2 to 7 (0 jobs indexed, 0 old indexes removed, 9 records moved)"
    )
    p = store.keys.route
    assert not [k for k in store._client.scan_iter(match=p.replace("{", "\\{").replace("}", "\\}") + "*")
                if k[len(p):].split(":")[0] in OLD_RECORD_KEYS]  # fmt: skip

    [worker] = store.workers()
    assert (worker.id, worker.host, worker.pid, worker.queues, worker.concurrency) == (
        "w-2",
        "host-2",
        77,
        ["up"],
        4,
    )
    assert (worker.command, worker.command_by, worker.handlers) == (
        "quiet",
        "operator:ann",
        [{"name": "old", "queue": "up"}],
    )
    assert worker.last_seen_at is not None and abs(worker.last_seen_at.timestamp() - (now - 1)) < 1e-3
    assert store.lock_info("recovery").owner == "w-2"
    assert not store.acquire_lock("recovery", "w-other", 10)
    [run] = store.recovery_runs()
    assert (run.id, run.recovered, run.failed, run.duration_ms) == ("r-1", 2, 1, 12.5)
    [maintenance] = store.maintenance_runs("retention")
    assert (maintenance.id, maintenance.count, maintenance.longest_batch_ms) == ("m-1", 9, 1.5)
    [schedule] = store.schedules()
    assert (schedule.name, schedule.cron, schedule.payload, schedule.catch_up, schedule.enabled) == (
        "nightly",
        "0 3 * * *",
        {"n": 1},
        False,
        False,
    )
    assert schedule.last_job_id == "j-1" and schedule.last_tick_at is not None
    n, left = store.failure_count("ann|10.0.0.1")
    assert n == 3 and 590 < left <= 600
    assert store.record_failure("ann|10.0.0.1", 600) == 4
    done, running = store.get_operation("op-done"), store.get_operation("op-open")
    assert done is not None and running is not None
    assert (done.state, done.filter, running.state, running.changed) == ("done", {}, "running", 2)
    assert [o.id for o in store.operations(unfinished=True)] == ["op-open"]
    assert [o.id for o in store.operations()] == ["op-open", "op-done"]
    [entry] = store.audit_page().items
    assert entry.kind == EventKind.SCHEDULE_DISABLED.value

    assert upgrade(store)["records_moved"] == 0  # idempotent: nothing is left to move
    assert [w.id for w in store.workers()] == ["w-2"]


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
    _as_layout_3(store)
    store._client.set(layout_key(store), "3")
    assert store.list_jobs(status=S.Queued, queue="q2").items == []  # not readable before the upgrade

    assert _cli_upgrade(url) == (
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

    assert _cli_upgrade(url) == (
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

    assert _cli_upgrade(url) == (
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
