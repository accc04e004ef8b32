"""A shard down is a shard down, not an outage (docs/architecture.md,
Shards): on a 3-master cluster of its own with ``shards=3``, one master is
stopped (SIGSTOP: it holds its data and answers nothing). The other
shards' jobs are still claimed and completed, counts and listings show
them, the store and the console name the shard that does not answer, and
when the master is resumed its jobs are all there and run."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from redis.crc import key_slot

from store import open_store
from store.lifecycle import JobStatus
from store.models import JobSpec
from store.redis.shards import shard_of_queue, shard_prefix
from store.redis.shards.sharded_store import ShardedRedisStore
from tests.backends import StoreHandle
from tests.redis_cluster import Cluster, available, cli
from tests.web.console_fixtures import ConsoleClient, console_app_for

SHARDS = 3
JOBS_A_QUEUE = 4


def master_pids(cluster: Cluster) -> dict[int, int]:
    """Each master's first slot -> its pid."""
    out = {}
    for port, pid in zip(cluster.ports, cluster._pids, strict=True):
        for line in cli(port, "cluster", "nodes").splitlines():
            parts = line.split()
            if "myself" in parts[2]:
                out[int(parts[8].split("-")[0])] = pid
    return out


def spread_prefix() -> str:
    """A prefix whose SHARDS tags fall on the three masters' thirds of the slots."""
    while True:
        prefix = f"lh-down-{uuid.uuid4().hex[:8]}"
        thirds = {key_slot(shard_prefix(prefix, k).encode()) * 3 // 16384 for k in range(SHARDS)}
        if len(thirds) == SHARDS:
            return prefix


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    if not available():
        pytest.skip("redis-server and redis-cli are needed for the Redis Cluster")
    started = Cluster(tmp_path)
    for port in started.ports:  # the other masters keep serving their slots while one is down
        cli(port, "config", "set", "cluster-require-full-coverage", "no")
    yield started
    started.stop()


def test_the_other_shards_run_while_one_master_is_stopped_and_nothing_is_lost(cluster: Cluster) -> None:
    prefix = spread_prefix()
    url = f"redis+cluster://127.0.0.1:{cluster.ports[0]}?prefix={quote(prefix)}&shards={SHARDS}"
    store = open_store(url, socket_timeout_s=1.5, connect_timeout_s=1.5, retries=0)
    assert isinstance(store, ShardedRedisStore)
    queues = {}
    for i in range(200):
        queues.setdefault(shard_of_queue(f"q{i}", SHARDS), f"q{i}")
    names = [queues[k] for k in range(SHARDS)]
    for name in names:
        store.enqueue_many([JobSpec("noop", {"n": n}, queue=name) for n in range(JOBS_A_QUEUE)])
    console = ConsoleClient(console_app_for(StoreHandle("redis-cluster-shards", url, store)).test_client())
    assert console.login("ann").status_code == 303
    app = console_app_for(StoreHandle("redis-cluster-shards", url, store))  # opened while all answer
    console = ConsoleClient(app.test_client())
    assert console.login("ann").status_code == 303
    down = 1
    slot = key_slot(shard_prefix(prefix, down).encode())
    pids = master_pids(cluster)
    pid = pids[max(first for first in pids if first <= slot)]
    os.kill(pid, signal.SIGSTOP)
    try:
        done = 0
        for _ in range(10):
            jobs = store.claim("w", names, 8)
            for job in jobs:
                store.complete(job.id, job.lease_token, None, worker_id="w")
            done += len(jobs)
            if done >= (SHARDS - 1) * JOBS_A_QUEUE:
                break
        assert done == (SHARDS - 1) * JOBS_A_QUEUE  # every job of the shards that answer
        assert list(store.unavailable_shards()) == [down]
        counts = store.counts()
        assert counts.by_status["Completed"] == (SHARDS - 1) * JOBS_A_QUEUE
        assert names[down] not in counts.by_queue  # left out, and said so
        listed = store.list_jobs(status=JobStatus.Completed, limit=50)
        assert len(listed.items) == (SHARDS - 1) * JOBS_A_QUEUE
        page = console.get("/jobs")
        assert page.status_code == 200 and f'data-unavailable-shards="{down}"' in page.text
    finally:
        os.kill(pid, signal.SIGCONT)
    # A claim sent while the master was stopped ran when it resumed: its leases
    # have no holder and expire; recovery puts those jobs back (nothing lost).
    store.health.answered(down)  # do not wait out RETRY_S here
    store.clock_offset_s += store.settings.lease_ttl_s + 1
    store.recover_expired()
    store.clock_offset_s += 60  # past their retry backoff
    for _ in range(10):
        jobs = store.claim("w", names, 8)
        for job in jobs:
            store.complete(job.id, job.lease_token, None, worker_id="w")
        if not jobs:
            break
    assert store.counts().by_status["Completed"] == SHARDS * JOBS_A_QUEUE  # nothing lost
    assert store.unavailable_shards() == {}
    store.close()
