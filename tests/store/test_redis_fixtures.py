"""Bulk fixtures of the Redis store (store/redis/fixtures.py): copies of a
job the store made read back as jobs made by the store's own paths would:
listings under every filter, counts, event totals, history, claim order."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator

import orjson
import pytest

from store import open_store
from store.lifecycle import JobStatus
from store.models import Job
from store.redis.fixtures import Copy, copy_jobs
from store.redis.store import RedisStore
from tests.backends import BACKENDS, delete_redis_prefix, redis_url_with_prefix

S = JobStatus
pytestmark = pytest.mark.skipif("redis" not in BACKENDS, reason="Redis not among the test backends")
N = 300


@pytest.fixture
def redis_store() -> Iterator[RedisStore]:
    url, prefix = redis_url_with_prefix()
    store = open_store(url)
    assert isinstance(store, RedisStore)
    yield store
    store.close()
    delete_redis_prefix(url, prefix)


def _templates(store: RedisStore) -> dict[JobStatus, Job]:
    """One job of each status but InProgress, made by the store itself."""
    done = store.enqueue("t", queue="tpl")
    failed = store.enqueue("t", queue="tpl", max_retries=0)
    canceled = store.enqueue("t", queue="tpl")
    for job in store.claim("w", ["tpl"], 2):
        if job.id == done.id:
            store.complete(job.id, job.lease_token, {"ok": 1}, worker_id="w")
        else:
            store.fail(
                job.id, job.lease_token, {"type": "E", "message": "m", "traceback": None}, worker_id="w"
            )
    store.cancel(canceled.id, actor="operator:t")
    queued = store.enqueue("t", queue="tpl")
    scheduled = store.enqueue("t", queue="tpl", delay_s=3600)
    return {
        s: store.get(j.id)
        for s, j in zip(S, (queued, scheduled, None, done, failed, canceled), strict=True)
        if j
    }


def test_copies_read_back_as_the_store_made_them(redis_store: RedisStore) -> None:
    store = redis_store
    templates = _templates(store)
    assert {s: t.status for s, t in templates.items()} == {s: s for s in templates}
    now = store.now()
    made: dict[JobStatus, list[str]] = {}
    for status, template in templates.items():
        kinds = Counter(e.kind for e in store.events(template.id))
        copies = [
            Copy(
                str(uuid.uuid4()),
                now - 3000 + i,
                name=f"n{i % 3}",
                payload=orjson.dumps({"i": i}).decode(),
                due_at=now + 600 + i if status is S.Scheduled else None,
            )
            for i in range(N)
        ]
        assert copy_jobs(store, template.id, f"q-{status.name}", copies, kinds) == N
        made[status] = [c.id for c in copies]

    for status, ids in made.items():
        queue = f"q-{status.name}"
        assert store.count_jobs(status, queue=queue) == N
        assert store.count_jobs(status, queue=queue, name="n1") == N // 3
        page = store.list_jobs(status=status, queue=queue, name="n1", limit=5)
        assert [j.id for j in page.items] == [i for i in reversed(ids)][1::3][:5]  # newest first, every third
        job = store.get(ids[7])
        assert (job.status, job.queue, job.name, job.payload) == (status, queue, "n1", {"i": 7})
        assert job.last_updated_at.timestamp() == pytest.approx(now - 3000 + 7)
        assert store.counts().by_queue[queue] == {status.name: N}
    assert [j.id for j in store.list_jobs(status=S.Completed, name="n0", limit=3).items] == made[S.Completed][
        ::-1
    ][2::3][:3]
    claimed = store.claim("w", [f"q-{S.Queued.name}"], 3)  # oldest due first, as the store orders them
    assert [j.id for j in claimed] == made[S.Queued][:3]
    assert store.claim("w", [f"q-{S.Scheduled.name}"], 3) == []  # not due
    totals = store.event_counts()
    assert totals["completed"] == N + 1 and totals["enqueued"] >= 5 * (N + 1)
    minutes = store.history(60, now - 3600, queue=f"q-{S.Completed.name}")
    assert sum(minutes["completed"].values()) == N
