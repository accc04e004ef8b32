"""The Redis search's merge of many listing zsets (store/redis/search.py
``_merge``): exact newest-first order within the scan window whatever the
spread of jobs over queues and statuses, and further reads batched.
FIRST_READ and CHUNK are made small so that a few dozen jobs need many
reads."""

from __future__ import annotations

import pytest

from store.redis import search
from store.redis.store import RedisStore
from tests.backends import BACKENDS

pytestmark = pytest.mark.skipif("redis" not in BACKENDS, reason="Redis not among the test backends")


@pytest.fixture(autouse=True)
def _small_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "FIRST_READ", 2)
    monkeypatch.setattr(search, "CHUNK", 4)


def _newest_first(store: RedisStore, ids: list[str]) -> list[str]:
    jobs = [store.get(job_id) for job_id in ids]
    return [j.id for j in sorted(jobs, key=lambda j: (j.last_updated_at, j.id), reverse=True)]


def _enqueue(store: RedisStore, queues: list[str]) -> list[str]:
    """A job on each queue of ``queues`` in turn, a second apart; every third
    one cancelled (a second index per queue)."""
    ids = []
    for i, queue in enumerate(queues):
        job = store.enqueue("t", queue=queue)
        store.clock_offset_s += 1
        if i % 3 == 2:
            store.cancel(job.id)
        ids.append(job.id)
    return ids


SPREADS = {
    # one busy queue among idle ones, then the idle ones newest
    "busy": ["hot"] * 30 + [f"q{i % 4}" for i in range(12)],
    # evenly over many queues
    "even": [f"q{i % 9}" for i in range(45)],
    # the busy queue newest, the others older
    "busy-last": [f"q{i % 5}" for i in range(15)] + ["hot"] * 25,
}


@pytest.mark.parametrize("spread", SPREADS)
@pytest.mark.parametrize("scan_limit", [1, 5, 17, 40, 500])
def test_the_scan_window_is_the_newest_jobs_in_order(
    redis_store: RedisStore, spread: str, scan_limit: int
) -> None:
    ids = _enqueue(redis_store, SPREADS[spread])
    expected = _newest_first(redis_store, ids)
    page = redis_store.search_jobs(id_part="-", limit=500, scan_limit=scan_limit)
    assert [j.id for j in page.items] == expected[:scan_limit]
    assert page.scanned == min(scan_limit, len(ids))
    assert page.complete == (scan_limit >= len(ids))


def test_queues_about_to_run_out_are_read_further_together(
    redis_store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = _newest_first(redis_store, _enqueue(redis_store, SPREADS["even"]))
    monkeypatch.setattr(search, "CHUNK", 64)
    reads = []
    pipe = redis_store._pipe
    monkeypatch.setattr(redis_store, "_pipe", lambda fill: reads.append(fill) or pipe(fill))
    page = redis_store.search_jobs(id_part="-", limit=500)
    assert [j.id for j in page.items] == expected
    # 18 zsets (9 queues x Ready, Cancelled) of 1 to 4 jobs, FIRST_READ 2:
    # a read of the leases, one of the queue names, one of the first
    # entries, a round of further reads (4 each), one of the hashes. One
    # read per zset that runs out would be 8 or more.
    assert len(reads) <= 6
