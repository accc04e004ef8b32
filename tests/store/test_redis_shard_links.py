"""Dependencies and keys across the shards of a sharded Redis store
(docs/architecture.md, Shards; store/redis/shards/links.py, key_owners.py):
released at least once and exactly in effect, also when the process that
ended the parent dies before the second shard's call."""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from collections.abc import Iterator

import pytest

from store import open_store
from store.errors import ParentUnfinished
from store.lifecycle import JobStatus
from store.models import JobSpec
from store.redis.shards import key_owners, shard_of_queue
from store.redis.shards.sharded_store import ShardedRedisStore
from tests.backends import delete_redis_prefix, redis_url_with_prefix

SHARDS = 3


def queues_on_two_shards() -> tuple[str, str]:
    """Two queue names of different shards."""
    names = [f"q{i}" for i in range(20)]
    first = names[0]
    other = next(n for n in names if shard_of_queue(n, SHARDS) != shard_of_queue(first, SHARDS))
    return first, other


@pytest.fixture
def url() -> Iterator[str]:
    base, prefix = redis_url_with_prefix()
    yield f"{base}&shards={SHARDS}"
    delete_redis_prefix(base, prefix)


@pytest.fixture
def store(url: str) -> Iterator[ShardedRedisStore]:
    opened = open_store(url)
    assert isinstance(opened, ShardedRedisStore)
    yield opened
    opened.close()


def outbox_lengths(store: ShardedRedisStore) -> list[int]:
    return [s._client.llen(s.keys.outbox) for s in store.shards]


def run_parent(store: ShardedRedisStore, job_id: str) -> None:
    [job] = store.claim("w", [store.get(job_id).queue], 1)
    assert job.id == job_id
    store.complete(job.id, job.lease_token, {"ok": 1}, worker_id="w")


def test_a_child_waits_for_a_parent_of_another_shard_and_is_released_by_its_ack(
    store: ShardedRedisStore,
) -> None:
    home, other = queues_on_two_shards()
    parent = store.enqueue("p", queue=home)
    child = store.enqueue("c", queue=other, depends_on=[parent.id])
    assert (child.status, child.pending_parents) == (JobStatus.Scheduled, 1)
    assert [j.id for j in store.children(parent.id)] == [child.id]
    assert [j.id for j in store.parents(child.id)] == [parent.id]
    with pytest.raises(ParentUnfinished):
        store.retry_now(child.id, actor="operator:ann")  # it would run before its parent
    run_parent(store, parent.id)
    assert store.get(child.id).status is JobStatus.Queued  # released in the ack's own drain
    assert outbox_lengths(store) == [0] * SHARDS


def test_a_failed_parent_cancels_its_child_on_another_shard_and_the_cancel_passes_on(
    store: ShardedRedisStore,
) -> None:
    home, other = queues_on_two_shards()
    parent = store.enqueue("p", queue=home, max_retries=0)
    child = store.enqueue("c", queue=other, depends_on=[parent.id])
    grandchild = store.enqueue("g", queue=home, depends_on=[child.id])
    [job] = store.claim("w", [home], 1)
    store.fail(job.id, job.lease_token, {"type": "E", "message": "boom", "traceback": None}, worker_id="w")
    assert store.get(child.id).status is JobStatus.Canceled
    assert store.get(grandchild.id).status is JobStatus.Canceled  # back on the first shard


def complete_and_die(url: str, job_id: str) -> None:
    """Ack ``job_id`` through the sharded store, then die before the store
    drains the outbox: the process ends between the two shards' calls."""
    from store.redis.shards import links

    drain = links.Links.drain

    def die(self: links.Links, shards: object = None) -> int:
        if any(s._client.llen(s.keys.outbox) for s in self.store.shards):
            os._exit(9)  # the parent's end is written; its release is not applied yet
        return drain(self, shards)  # type: ignore[arg-type]

    links.Links.drain = die  # type: ignore[method-assign]
    store = open_store(url)
    [job] = store.claim("w-dies", [store.get(job_id).queue], 1)
    store.complete(job.id, job.lease_token, None, worker_id="w-dies")
    os._exit(0)  # not reached


def test_a_release_left_by_a_process_killed_between_the_shards_is_applied_once_by_recovery(
    store: ShardedRedisStore, url: str
) -> None:
    home, other = queues_on_two_shards()
    parent = store.enqueue("p", queue=home)
    child = store.enqueue("c", queue=other, depends_on=[parent.id])
    process = mp.get_context("spawn").Process(target=complete_and_die, args=(url, parent.id))
    process.start()
    process.join(60)
    assert process.exitcode == 9  # killed after the parent's shard, before the child's
    assert store.get(parent.id).status is JobStatus.Completed
    assert store.get(child.id).status is JobStatus.Scheduled
    assert sum(outbox_lengths(store)) == 1
    store.recover_expired()  # every recovery pass drains every shard
    assert store.get(child.id).status is JobStatus.Queued
    assert outbox_lengths(store) == [0] * SHARDS
    # A replay of the entry (a drain that died before removing it) changes nothing.
    shard = store.of_id(parent.id)
    shard._client.rpush(shard.keys.outbox, f'["{child.id}", "{parent.id}", 400, ""]')
    assert store.links.drain() == 0
    released = [e for e in store.events(child.id) if e.to_status is JobStatus.Queued]
    assert len(released) == 1


def test_a_parent_that_ends_between_the_link_and_the_write_releases_its_child(
    store: ShardedRedisStore,
) -> None:
    home, other = queues_on_two_shards()
    parent = store.enqueue("p", queue=home)
    child_shard, parent_shard = store.of_queue(other), store.of_queue(home)
    child_id = child_shard._new_id()
    [status] = parent_shard._eval(
        parent_shard._lua.link_children, parent_shard._route, [child_id, parent.id]
    )[1:]
    store.links.mark()  # as Links.enqueue does after its links
    run_parent(store, parent.id)  # its entry comes before the child exists
    spec = JobSpec("c", None, queue=other, depends_on=(parent.id,))
    [child], _ = child_shard._enqueue_flow(spec, child_id, {parent.id: int(status)})
    assert child.status is JobStatus.Queued
    assert outbox_lengths(store) == [0] * SHARDS


def test_a_batch_callback_on_another_shard_runs_after_the_batch(store: ShardedRedisStore) -> None:
    home, other = queues_on_two_shards()
    batch = store.create_batch(
        [JobSpec("b", {"i": i}, queue=home) for i in range(3)], JobSpec("cb", None, queue=other)
    )
    assert store.of_id(batch.callback_job_id or "") is store.of_queue(other)
    for job in store.batch_jobs(batch.id):
        assert store.get(batch.callback_job_id or "").status is JobStatus.Scheduled
        run_parent(store, job.id)
    assert store.get(batch.callback_job_id or "").status is JobStatus.Queued
    assert store.get_batch(batch.id).finished


def test_keys_name_one_job_across_shards(store: ShardedRedisStore) -> None:
    home, other = queues_on_two_shards()
    first, created = store.enqueue_idempotent(JobSpec("t", None, queue=home, idempotency_key="order-7"))
    again, created_again = store.enqueue_idempotent(
        JobSpec("t", None, queue=other, idempotency_key="order-7")
    )
    assert (created, created_again, again.id) == (True, False, first.id)
    unique = JobSpec("u", None, queue=home, unique_key="report", unique_for=60.0)
    held, _ = store.enqueue_idempotent(unique)
    elsewhere, made = store.enqueue_idempotent(
        JobSpec("u", None, queue=other, unique_key="report", unique_for=60.0)
    )
    assert (elsewhere.id, made) == (held.id, False)
    store.delete(first.id, actor="operator:ann")  # a deleted job's key is free again, on any shard
    fresh, made = store.enqueue_idempotent(JobSpec("t", None, queue=other, idempotency_key="order-7"))
    assert made and fresh.id != first.id


def test_a_keyed_enqueue_waits_for_an_enqueue_of_its_key_in_flight(store: ShardedRedisStore) -> None:
    """An enqueue whose key another enqueue has claimed but not yet written
    answers that job once it is written, never JobNotFound."""
    home, _ = queues_on_two_shards()
    spec = JobSpec("u", None, queue=home, unique_key="nightly", unique_for=60.0)
    keys, shard = store.job_keys, store.of_queue(home)
    in_flight = shard._new_id()
    assert keys._claim("unique", "nightly", in_flight) is None  # claimed, job not written yet
    met, answers = threading.Event(), []
    holds = keys._holds

    def noticing(*args: object) -> str:
        found = holds(*args)
        if found == key_owners.IN_FLIGHT:
            met.set()
        return found

    keys._holds = noticing  # type: ignore[method-assign]
    waiter = threading.Thread(target=lambda: answers.append(store.enqueue_idempotent(spec)))
    waiter.start()
    assert met.wait(10), "the second enqueue never met the claim in flight"
    shard._write_jobs([spec], ids=[in_flight])
    keys._call(keys._home("nightly"), "settle", "unique", "nightly", in_flight)
    waiter.join(10)
    [(job, made)] = answers
    assert (job.id, made) == (in_flight, False)
