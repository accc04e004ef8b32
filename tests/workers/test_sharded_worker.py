"""A real worker on a sharded Redis store (docs/architecture.md, Shards):
its queues on three shards, a chain of dependencies that crosses them and
a batch whose callback sits on another shard run to the end, each job once;
an idle worker is woken by an enqueue on any of its queues' shards."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store import open_store
from store.lifecycle import JobStatus
from store.models import JobSpec
from store.redis.shards import shard_of_queue
from tests.backends import StoreHandle, delete_redis_prefix, redis_url_with_prefix
from tests.workers.procs import job_is, registered, wait_until
from tests.workers.test_worker_inprocess import make_worker, running
from workers.claim import IdleBackoff

SHARDS = 3


def one_queue_a_shard() -> list[str]:
    """A queue name on each of the shards."""
    found: dict[int, str] = {}
    for i in range(100):
        found.setdefault(shard_of_queue(f"s{i}", SHARDS), f"s{i}")
    return [found[k] for k in range(SHARDS)]


@pytest.fixture
def sharded() -> Iterator[StoreHandle]:
    base, prefix = redis_url_with_prefix()
    url = f"{base}&shards={SHARDS}"
    handle = StoreHandle("redis-shards", url, open_store(url))
    handle.cleanups.append(lambda: delete_redis_prefix(base, prefix))
    yield handle
    handle.close()


def test_a_worker_runs_jobs_of_every_shard_and_releases_across_them(sharded: StoreHandle) -> None:
    store = sharded.store
    queues = one_queue_a_shard()
    first = store.enqueue("noop", {"step": 0}, queue=queues[0])
    second = store.enqueue("noop", {"step": 1}, queue=queues[1], depends_on=[first.id])
    third = store.enqueue("noop", {"step": 2}, queue=queues[2], depends_on=[second.id])
    batch = store.create_batch(
        [JobSpec("noop", {"n": n}, queue=queues[1]) for n in range(5)], JobSpec("noop", None, queue=queues[2])
    )
    worker = make_worker(sharded, queues=tuple((q, 1) for q in queues), burst=True)
    assert worker.run() == 0
    for job in (first, second, third):
        done = store.get(job.id)
        assert (done.status, done.lease_token) == (JobStatus.Completed, 1)  # claimed once
    assert store.get(batch.callback_job_id or "").status is JobStatus.Completed
    assert store.counts().by_status["Completed"] == 3 + 5 + 1
    assert [s._client.llen(s.keys.outbox) for s in store.shards] == [0] * SHARDS


def test_an_idle_worker_is_woken_by_an_enqueue_on_any_shard(sharded: StoreHandle) -> None:
    store = sharded.store
    queues = one_queue_a_shard()
    worker = make_worker(sharded, queues=tuple((q, 1) for q in queues))
    worker.claims._idle = IdleBackoff(30.0, 30.0)  # its poll would take 30 s: only a notice is this quick
    with running(worker):
        wait_until(lambda: worker.listener is not None and registered(store, "w-in"), what="worker up")
        warm = store.enqueue("noop", queue=queues[0])
        wait_until(lambda: job_is(store, warm.id, "Completed"), timeout=40, what="first job")
        for queue in reversed(queues):
            job = store.enqueue("noop", queue=queue)
            wait_until(lambda j=job: job_is(store, j.id, "Completed"), timeout=5, what=f"woken on {queue}")
