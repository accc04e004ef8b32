"""Upgrading a Redis store of key layout 2 (store/redis/upgrade.py,
store/redis/upgrade_records.py): its counters, history, leases and records
kept, through ``leasehold db upgrade``."""

from __future__ import annotations

import json

import pytest

from store.bookings import failure_digest
from store.counters import HISTORY_WIDTHS
from store.lifecycle import EventKind, JobStatus
from store.redis.keys import parse_history_field
from store.redis.layout import layout_key
from store.redis.store import RedisStore
from store.redis.upgrade import upgrade
from tests.backends import BACKENDS
from tests.store.helpers import expire_leases
from tests.store.redis_layouts import as_layout_3, cli_upgrade

pytestmark = pytest.mark.skipif("redis" not in BACKENDS, reason="Redis not among the test backends")
#: The first part of every layout-2 record key (store/redis/upgrade_records.py).
OLD_RECORD_KEYS = {"worker", "workers", "lock", "failure", "schedule", "schedules", "recovery_runs"}
OLD_RECORD_KEYS |= {"maintenance_runs", "operations"}


def _as_layout_2(store: RedisStore) -> None:
    """Rewrite the store's counts and lease scores as layout 2 kept them:
    status counters, ``e:`` totals of every kind (the history kinds' with
    ``extra`` events counted before the per-queue totals existed), hour
    buckets written with the minutes (the current hour's too), lease scores
    in float seconds, no roll-up mark, version "2"."""
    as_layout_3(store)
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

    assert cli_upgrade(url).startswith("upgraded the key layout from version 2 to 7")
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
    assert {j.id for j in store.list_jobs(status=JobStatus.InProgress).items} == {next_b.id}
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
    assert cli_upgrade(url) == (
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
