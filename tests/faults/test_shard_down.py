"""A shard down is a shard down, not an outage (docs/architecture.md,
Shards): on a 3-master cluster of its own with ``shards=3``, one master is
stopped (SIGSTOP: it holds its data and answers nothing). The other
shards' jobs are still claimed and completed, counts and listings show
them, the store and the console name the shard that does not answer, and
when the master is resumed its jobs are all there and run. A Functions
library the other masters lost while it was stopped (a restart without
persistence, a new version's deploy) is loaded on them alone, and their
shards' jobs run."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from redis.cluster import RedisCluster
from redis.crc import key_slot

from store import open_store
from store.lifecycle import JobStatus
from store.models import JobSpec
from store.redis.functions import LIBRARY_GRACE_S, OUR_LIBRARY, Library
from store.redis.shards import shard_of_queue, shard_prefix
from store.redis.shards.sharded_store import ShardedRedisStore
from tests.backends import StoreHandle
from tests.redis_cluster import Cluster, available, cli
from tests.web.console_fixtures import ConsoleClient, console_app_for

SHARDS = 3
JOBS_A_QUEUE = 4


def masters(cluster: Cluster) -> dict[int, tuple[int, int]]:
    """Each master's first slot -> its (port, pid)."""
    out = {}
    for port, pid in zip(cluster.ports, cluster._pids, strict=True):
        for line in cli(port, "cluster", "nodes").splitlines():
            parts = line.split()
            if "myself" in parts[2]:
                out[int(parts[8].split("-")[0])] = (port, pid)
    return out


def master_of(cluster: Cluster, prefix: str, shard: int) -> tuple[int, int]:
    """(port, pid) of the master that holds ``shard``'s keys."""
    slot = key_slot(shard_prefix(prefix, shard).encode())
    held = masters(cluster)
    return held[max(first for first in held if first <= slot)]


def one_queue_a_shard() -> list[str]:
    """A queue name for each shard, shard 0 first."""
    queues: dict[int, str] = {}
    for i in range(200):
        queues.setdefault(shard_of_queue(f"q{i}", SHARDS), f"q{i}")
    return [queues[k] for k in range(SHARDS)]


def filled_store(cluster: Cluster) -> tuple[str, str, ShardedRedisStore, list[str]]:
    """A sharded store on ``cluster`` under a fresh prefix, short timeouts and
    no retries, with JOBS_A_QUEUE jobs on one queue of each shard:
    ``(prefix, url, store, queue names)``."""
    prefix = spread_prefix()
    url = f"redis+cluster://127.0.0.1:{cluster.ports[0]}?prefix={quote(prefix)}&shards={SHARDS}"
    store = open_store(url, socket_timeout_s=1.5, connect_timeout_s=1.5, retries=0)
    assert isinstance(store, ShardedRedisStore)
    names = one_queue_a_shard()
    for name in names:
        store.enqueue_many([JobSpec("noop", {"n": n}, queue=name) for n in range(JOBS_A_QUEUE)])
    return prefix, url, store, names


def run_all(store: ShardedRedisStore, names: list[str], expected: int) -> int:
    """Claim and complete up to ``expected`` jobs of ``names`` (a few rounds); how many ran."""
    done = 0
    for _ in range(10):
        jobs = store.claim("w", names, 8)
        for job in jobs:
            store.complete(job.id, job.lease_token, None, worker_id="w")
        done += len(jobs)
        if done >= expected:
            break
    return done


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
    prefix, url, store, names = filled_store(cluster)
    console = ConsoleClient(console_app_for(StoreHandle("redis-cluster-shards", url, store)).test_client())
    assert console.login("ann").status_code == 303
    app = console_app_for(StoreHandle("redis-cluster-shards", url, store))  # opened while all answer
    console = ConsoleClient(app.test_client())
    assert console.login("ann").status_code == 303
    down = 1
    _, pid = master_of(cluster, prefix, down)
    os.kill(pid, signal.SIGSTOP)
    try:
        done = run_all(store, names, (SHARDS - 1) * JOBS_A_QUEUE)
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


def test_a_library_lost_while_one_master_is_stopped_loads_on_the_others(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    prefix, _, store, names = filled_store(cluster)
    down = 2
    down_port, pid = master_of(cluster, prefix, down)
    os.kill(pid, signal.SIGSTOP)
    try:
        for port in cluster.ports:
            if port != down_port:
                assert cli(port, "function", "flush").strip() == "OK"
        done = run_all(store, names, (SHARDS - 1) * JOBS_A_QUEUE)
        assert done == (SHARDS - 1) * JOBS_A_QUEUE  # the library was loaded where it was lost
        skipped = [r.getMessage() for r in caplog.records if r.name == "store.redis.functions"]
        assert len(skipped) == 1 and f":{down_port}, which does not answer" in skipped[0]
    finally:
        os.kill(pid, signal.SIGCONT)
    store.health.answered(down)  # do not wait out RETRY_S here
    store.clock_offset_s += store.settings.lease_ttl_s + 1
    store.recover_expired()  # a claim sent to it while it was stopped may have run when it resumed
    store.clock_offset_s += 60
    run_all(store, names, SHARDS * JOBS_A_QUEUE)
    assert store.counts().by_status["Completed"] == SHARDS * JOBS_A_QUEUE  # nothing lost
    store.close()


def _fake_library(name: str) -> str:
    return f"#!lua name={name}\nredis.register_function('{name}_f', function() return 1 end)\n"


def _libraries_on(port: int) -> set[str]:
    return {word for word in cli(port, "function", "list").split() if OUR_LIBRARY.fullmatch(word)}


def test_a_stale_library_on_a_stopped_master_is_unloaded_once_it_answers(cluster: Cluster) -> None:
    old, new = "leasehold_0000000000b1", "leasehold_0000000000b2"
    prefix = spread_prefix()
    registry = f"{{{shard_prefix(prefix, 0)}}}:libraries"  # on a master that stays up
    down_port, pid = master_of(cluster, prefix, 1)
    client = RedisCluster(
        host="127.0.0.1", port=cluster.ports[0], socket_timeout=1.5, socket_connect_timeout=1.5
    )
    for port in cluster.ports:
        cli(port, "function", "load", _fake_library(old))
    seconds, _ = client.time()
    client.zadd(registry, {old: seconds - 2 * LIBRARY_GRACE_S})
    library = Library(client, registry, built=(new, _fake_library(new)))
    os.kill(pid, signal.SIGSTOP)
    try:
        library.load()  # the new version loads where it can and unloads the old one there
    finally:
        os.kill(pid, signal.SIGCONT)
    up = [port for port in cluster.ports if port != down_port]
    assert all(_libraries_on(port) == {new} for port in up)
    assert client.zscore(registry, old) is not None  # kept, for a later load to unload
    assert library.unload_stale() == [old]
    assert all(old not in _libraries_on(port) for port in cluster.ports)  # the stopped one's too
    assert client.zscore(registry, old) is None
    client.close()
