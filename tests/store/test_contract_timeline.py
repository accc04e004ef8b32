"""Contract: a job's whole timeline, event by event, is the same on every
store, whichever events a store keeps as rows and which it derives from the
job itself (the Redis store derives enqueued, claimed and completed from the
job hash: lua/lib/job.lua ``happen``)."""

from __future__ import annotations

import pytest

from store.base import JobStore
from store.errors import LeaseLost
from store.lifecycle import EventKind as E
from store.lifecycle import JobStatus
from store.models import Lease
from store.redis.store import RedisStore
from store.sql.store import SqlStore
from tests.backends import redis_engine
from tests.store.helpers import ERROR, expire_leases

S = JobStatus


def _timeline(store: JobStore, job_id: str) -> list[tuple[str, S | None, S | None, str | None, int | None]]:
    return [(e.kind, e.from_status, e.to_status, e.actor, e.token) for e in store.events(job_id)]


def test_every_run_of_a_job_shows_in_order(store: JobStore) -> None:
    job = store.enqueue("t", max_retries=3, delay_s=1)
    store.clock_offset_s += 2
    [a] = store.claim("w-1", ["default"], 1)
    store.fail(job.id, a.lease_token, ERROR, worker_id="w-1")  # retry scheduled
    store.retry_now(job.id, actor="operator:ann")
    assert [j.lease_token for j in store.claim("w-2", ["default"], 1)] == [2]
    expire_leases(store)
    store.recover_expired(owner="r")  # lease expired: retried
    store.retry_now(job.id, actor="operator:ann")
    [c] = store.claim("w-3", ["default"], 1)
    store.release(job.id, c.lease_token, worker_id="w-3")
    [d] = store.claim("w-4", ["default"], 1)
    store.complete(job.id, d.lease_token, {"ok": 1}, worker_id="w-4")
    renewed = store.heartbeat("w-4", [Lease(job.id, d.lease_token, d.lease_expires_at)])
    assert renewed.renewed == []  # its own ack finished it: refused, and not recorded
    assert store.heartbeat("w-3", [Lease(job.id, c.lease_token, d.lease_expires_at)]).refused
    store.cancel(job.id, actor="operator:bob")
    store.requeue(job.id, actor="operator:bob")
    [e] = store.claim("w-5", ["default"], 1)
    with pytest.raises(LeaseLost):
        store.complete(job.id, d.lease_token, None, worker_id="w-4")
    assert _timeline(store, job.id) == [
        (E.ENQUEUED, None, S.Scheduled, None, 0),
        (E.CLAIMED, S.Scheduled, S.InProgress, "w-1", 1),
        (E.RETRY_SCHEDULED, S.InProgress, S.Scheduled, "w-1", 1),
        (E.RETRIED_NOW, S.Scheduled, S.Queued, "operator:ann", 1),
        (E.CLAIMED, S.Queued, S.InProgress, "w-2", 2),
        (E.LEASE_EXPIRED, S.InProgress, S.Scheduled, "r", 2),
        (E.RETRIED_NOW, S.Scheduled, S.Queued, "operator:ann", 2),
        (E.CLAIMED, S.Queued, S.InProgress, "w-3", 3),
        (E.RELEASED, S.InProgress, S.Scheduled, "w-3", 3),
        (E.CLAIMED, S.Scheduled, S.InProgress, "w-4", 4),
        (E.COMPLETED, S.InProgress, S.Completed, "w-4", 4),
        (E.HEARTBEAT_REFUSED, None, None, "w-3", 3),
        (E.CANCELED, S.Completed, S.Canceled, "operator:bob", 4),
        (E.REQUEUED, S.Canceled, S.Queued, "operator:bob", 4),
        (E.CLAIMED, S.Queued, S.InProgress, "w-5", 5),
        (E.COMPLETION_REFUSED, None, None, "w-4", 4),
    ]
    events = store.events(job.id)
    assert [ev.at for ev in events] == sorted(ev.at for ev in events)
    assert store.events(job.id, limit=2) == events[-2:]
    assert e.lease_token == 5


def test_the_happy_path_is_counted(store: JobStore) -> None:
    job = store.enqueue("t")
    [c] = store.claim("w", ["default"], 1)
    store.complete(job.id, c.lease_token, None, worker_id="w")
    enqueued, claimed, completed = store.events(job.id)
    assert (enqueued.kind, claimed.kind, completed.kind) == ("enqueued", "claimed", "completed")
    assert (claimed.actor, completed.actor) == ("w", "w")
    counts = store.event_counts()
    assert (counts["enqueued"], counts["claimed"], counts["completed"]) == (1, 1, 1)


def test_redis_writes_no_happy_path_event(store: JobStore) -> None:
    """The Redis store appends no event on the happy path: the job's stamps
    are its enqueued, claimed and completed events, to the microsecond."""
    if not isinstance(redis_engine(store), RedisStore):
        pytest.skip("the Redis store's layout")
    job = store.enqueue("t")
    shard = redis_engine(store, job_id=job.id)
    [c] = store.claim("w", ["default"], 1)
    done = store.complete(job.id, c.lease_token, None, worker_id="w")
    assert shard._client.llen(shard.keys.events(job.id)) == 0
    enqueued, claimed, completed = store.events(job.id)
    assert (enqueued.at, claimed.at, completed.at) == (done.created_at, done.started_at, done.completed_at)
    store.cancel(job.id, actor="operator:ann")  # the run's events are written before the cancel's
    assert shard._client.llen(shard.keys.events(job.id)) == 3
    assert [e.kind for e in store.events(job.id)] == ["enqueued", "claimed", "completed", "canceled"]


def test_sql_counts_a_queues_events_once(store: JobStore) -> None:
    """The SQL stores write no total another counter implies: an event of a
    history kind naming its queue is counted per queue only, and its total
    is read as the sum of the queues' (store/sql/bookkeeping.py)."""
    if not isinstance(store, SqlStore):
        pytest.skip("the SQL stores' counters")
    for queue in ("a", "b"):
        job = store.enqueue("t", queue=queue)
        [c] = store.claim("w", [queue], 1)
        store.complete(job.id, c.lease_token, None, worker_id="w")
    keys = {key for key, _ in store._counter_rows()}
    assert {"q:enqueued:a", "q:enqueued:b", "q:completed:a", "e:claimed"} <= keys
    assert not {"e:enqueued", "e:completed"} & keys
    counts = store.event_counts()
    assert (counts["enqueued"], counts["claimed"], counts["completed"]) == (2, 2, 2)
