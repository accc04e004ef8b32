"""The Redis store on a real 3-master Redis Cluster (``redis+cluster://``):
what is particular to it. The contract suite runs on the same throwaway
cluster (tests/redis_cluster.py) as the backend ``redis-cluster``; it only
works because every key of a deployment shares one hash tag: the library's
functions build each key from the prefix they are given as their one
declared key, and Redis Cluster refuses a key of another slot.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from redis.cluster import RedisCluster

from store import StoreSettings, open_store
from store.errors import JobNotFound, LeaseLost
from store.lifecycle import EventKind, JobStatus
from store.models import Lease, MaintenanceRun, Schedule, WorkerInfo
from store.redis.store import RedisStore
from tests.redis_cluster import Cluster
from tests.redis_cluster import cli as _cli
from tests.store.helpers import ERROR, expire_leases, job_in

pytestmark = pytest.mark.cluster
S = JobStatus


@pytest.fixture
def cluster_ports(redis_cluster: Cluster) -> list[int]:
    return redis_cluster.ports


@pytest.fixture
def store(redis_cluster: Cluster) -> Iterator[RedisStore]:
    url, prefix = redis_cluster.url_with_prefix()
    opened = open_store(url, StoreSettings())
    assert isinstance(opened, RedisStore)
    yield opened
    opened.close()
    redis_cluster.delete_prefix(prefix)


def test_every_key_lives_in_one_slot_on_one_node(store: RedisStore, cluster_ports: list[int]) -> None:
    job = store.enqueue("t", delay_s=5)
    store.retry_now(job.id)
    [c] = store.claim("w", ["default"], 1)
    store.complete(job.id, c.lease_token, None)
    store.worker_heartbeat(WorkerInfo("w", "host", 1, ["default"], 1))
    assert store.acquire_lock("recovery", "me", 10)
    k = store.keys
    used = [k.job(job.id), k.events(job.id), k.ready("default"), k.scheduled("default"), *k.common()]
    used += [k.idempotency, k.record("worker", "w"), k.record_index("worker"), k.record("hold", "recovery")]
    client = RedisCluster(host="127.0.0.1", port=cluster_ports[0], decode_responses=True)
    try:
        assert len({client.keyslot(key) for key in used}) == 1
        holders = [
            node.name
            for node in client.get_primaries()
            if any(True for _ in node.redis_connection.scan_iter(match=f"*{{{k.prefix}}}*", count=1000))
        ]
        assert len(holders) == 1
    finally:
        client.close()


def _getkeys_calls(client: RedisCluster) -> int:
    total = 0
    for node in client.get_primaries():
        stats = node.redis_connection.info("commandstats")
        total += int(stats.get("cmdstat_command|getkeys", {}).get("calls", 0))
    return total


def test_a_function_call_is_one_round_trip(store: RedisStore, cluster_ports: list[int]) -> None:
    """FCALL is routed by its first key (the prefix), without asking a node
    for its keys first (COMMAND GETKEYS)."""
    client = RedisCluster(host="127.0.0.1", port=cluster_ports[0], decode_responses=True)
    try:
        store.now()  # the library is loaded
        before = _getkeys_calls(client)
        job = store.enqueue("t")
        [c] = store.claim("w", ["default"], 1)
        store.complete(job.id, c.lease_token, None)
        assert _getkeys_calls(client) == before
    finally:
        client.close()


def test_claim_priority_heartbeat_and_fencing(store: RedisStore) -> None:
    low = [store.enqueue("t", {"i": i}) for i in range(3)]
    high = store.enqueue("t", priority=10)
    later = store.enqueue("t", delay_s=60)
    other = store.enqueue("t", queue="other")
    claimed = store.claim("w", ["default"], 10, lease_ttl_s=30)
    assert [j.id for j in claimed] == [high.id] + [j.id for j in low]
    assert all(j.status is S.InProgress and j.lease_token == 1 for j in claimed)
    assert store.get(later.id).status is S.Scheduled and store.get(other.id).status is S.Queued

    a, b = claimed[0], claimed[1]
    store.clock_offset_s += 10
    beat = store.heartbeat("w", [Lease(a.id, a.lease_token), Lease(b.id, b.lease_token + 1)], 30)
    assert [x.job_id for x in beat.renewed] == [a.id] and [x.job_id for x in beat.refused] == [b.id]
    assert store.get(a.id).lease_expires_at == beat.renewed[0].expires_at > a.lease_expires_at

    with pytest.raises(LeaseLost) as err:
        store.complete(b.id, b.lease_token - 1, {"late": True}, worker_id="w-old")
    assert err.value.current_token == b.lease_token
    assert store.get(b.id).status is S.InProgress
    assert store.events(b.id)[-1].kind == EventKind.COMPLETION_REFUSED
    done = store.complete(b.id, b.lease_token, {"ok": 1}, worker_id="w")
    assert (done.status, done.result) == (S.Completed, {"ok": 1})
    out = store.complete_many([(a.id, a.lease_token, None), (b.id, b.lease_token, None)], worker_id="w")
    assert out[0].status is S.Completed and isinstance(out[1], LeaseLost)


def test_fail_retry_cancel_and_requeue(store: RedisStore) -> None:
    job = store.enqueue("t", max_retries=1)
    [c] = store.claim("w", ["default"], 1)
    failed = store.fail(job.id, c.lease_token, ERROR)
    assert (failed.status, failed.retry_count) == (S.Scheduled, 1)
    assert store.claim("w", ["default"], 1) == []
    store.clock_offset_s += store.settings.retry.delay_s(1) + 0.1
    [c] = store.claim("w", ["default"], 1)
    assert c.lease_token == 2
    final = store.fail(job.id, c.lease_token, ERROR)
    assert (final.status, final.retry_count) == (S.Failed, 1)
    assert store.cancel(job.id, actor="operator:ann").status is S.Canceled
    fresh = store.requeue(job.id, actor="operator:ann")
    assert (fresh.status, fresh.retry_count) == (S.Queued, 0)
    assert [e.kind for e in store.audit(10)] == [EventKind.REQUEUED, EventKind.CANCELED]
    [again] = store.claim("w", ["default"], 1)
    assert again.lease_token == 3


def test_recovery_with_clock_offset(store: RedisStore) -> None:
    jobs = store.enqueue_many([("t", {"i": i}) for i in range(30)])
    store.claim("w-dead", ["default"], 30, lease_ttl_s=5)
    store.enqueue("live")
    expire_leases(store, 6)
    [live] = store.claim("w-live", ["default"], 1, lease_ttl_s=60)
    assert store.expired_lease_count() == 30
    preview = store.preview_recovery(limit=20)
    assert preview.dry_run and len(preview.recovered) == 20 and store.expired_lease_count() == 30
    first = store.recover_expired(limit=20, owner="rec")
    second = store.recover_expired(limit=20, owner="rec")
    assert (len(first.recovered), first.more, len(second.recovered), second.more) == (20, True, 10, False)
    assert {r.job_id for r in first.recovered + second.recovered} == {j.id for j in jobs}
    assert store.get(live.id).lease_expires_at == live.lease_expires_at
    assert store.expired_lease_count() == 0
    assert store.event_counts()[EventKind.LEASE_EXPIRED] == 30


def test_counts_and_list_paging(store: RedisStore) -> None:
    store.enqueue_many(
        [("alpha", {"i": i}, "qa") for i in range(7)] + [("beta", {"i": i}, "qb") for i in range(5)]
    )
    store.claim("w", ["qb"], 2)
    counts = store.counts()
    assert counts.by_status == {**{s.name: 0 for s in S}, "Queued": 10, "InProgress": 2}
    assert counts.by_queue == {"qa": {"Queued": 7}, "qb": {"Queued": 3, "InProgress": 2}}
    seen, cursor = [], None
    while True:
        page = store.list_jobs(limit=5, cursor=cursor)
        seen.extend(page.items)
        if (cursor := page.next_cursor) is None:
            break
    assert len({j.id for j in seen}) == 12
    stamps = [(j.last_updated_at, j.id) for j in seen]
    assert stamps == sorted(stamps, reverse=True)
    assert len(store.list_jobs(status=S.Queued, queue="qb", limit=50).items) == 3
    page = store.search_jobs(payload="i=3")  # lua/job_fields.lua reads the payloads
    assert sorted(j.name for j in page.items) == ["alpha", "beta"] and page.complete


def test_acks_claiming_the_next_jobs_on_the_cluster(store: RedisStore) -> None:
    """lua/complete_claim.lua: acks, their progress and the next claim in one call."""
    first, second = store.enqueue("t", queue="qa"), store.enqueue("t", queue="qa")
    [run] = store.claim("w", ["qa"], 1)
    progress = [(run.id, run.lease_token, 1.0, "done")]
    outcomes, jobs = store.complete_and_claim(
        [(run.id, run.lease_token, {"ok": 1})], "w", [["qa"]], 2, progress=progress
    )
    assert (outcomes, [j.id for j in jobs]) == ([None], [second.id])
    done = store.get(first.id)
    assert (done.status, done.result, done.progress["message"]) == (S.Completed, {"ok": 1}, "done")
    assert store.counts().by_queue == {"qa": {"Completed": 1, "InProgress": 1}}
    assert store.count_jobs(S.InProgress) == 1


def test_locks_workers_clock_and_script_reload(store: RedisStore, cluster_ports: list[int]) -> None:
    assert abs(store.now() - time.time()) < 5
    assert store.acquire_lock("recovery", "a", 10) and not store.acquire_lock("recovery", "b", 10)
    assert store.lock_info("recovery").owner == "a"
    store.clock_offset_s += 11
    assert store.lock_info("recovery").owner is None and store.acquire_lock("recovery", "b", 10)
    store.worker_heartbeat(WorkerInfo("w-1", "host", 1, ["a"], 2, ["j1"]))
    assert [(w.id, w.jobs_in_hand) for w in store.workers()] == [("w-1", ["j1"])]
    for port in cluster_ports:  # NOSCRIPT everywhere: scripts are reloaded transparently
        assert _cli(port, "script", "flush").strip() == "OK"
    job = store.enqueue("t")
    assert [j.id for j in store.claim("w", ["default"], 1)] == [job.id]


def test_operating_scripts_on_the_cluster(store: RedisStore) -> None:
    """Unique jobs, pause/resume, delete, purge, worker pruning, maintenance
    runs and schedules: every new script runs on the cluster (no cross-slot)."""
    first = store.enqueue("u", {"a": 1}, unique_for=60)
    assert store.enqueue("u", {"a": 1}, unique_for=60).id == first.id
    store.pause_queue("default", actor="operator:ann")
    assert store.claim("w", ["default"], 5) == []
    store.resume_queue("default", actor="operator:ann")
    assert [q.paused for q in store.queue_states()] == [False]
    store.delete(first.id, actor="operator:ann")
    with pytest.raises(JobNotFound):
        store.get(first.id)
    done = job_in(store, S.Completed)
    expire_leases(store, 120)
    assert store.count_purgeable(60) == 1 and store.purge(60) == 1
    with pytest.raises(JobNotFound):
        store.get(done.id)
    store.worker_heartbeat(WorkerInfo("w-old", "host", 1, ["default"], 1))
    store.clock_offset_s += 600
    assert store.prune_workers(300) == ["w-old"]
    at = store.now()
    when = datetime.fromtimestamp(at, UTC)
    store.record_maintenance_run(MaintenanceRun("r", "retention", when, when, "me", 1, 1.0, 1.0))
    assert [r.id for r in store.maintenance_runs("retention")] == ["r"]
    store.save_schedules([Schedule("nightly", "report", "0 3 * * *")])
    assert store.set_schedule_enabled("nightly", False).enabled is False
    store.record_tick("nightly", at, "job-1")
    assert [(s.name, s.last_job_id) for s in store.schedules()] == [("nightly", "job-1")]


def test_console_scripts_on_the_cluster(store: RedisStore) -> None:
    """Attempts, progress, worker commands and history (written by enqueue,
    complete and apply_failures, trimmed by trim_history) on the cluster."""
    job = store.enqueue("t", max_retries=0, queue="mail")
    [c] = store.claim("w", ["mail"], 1)
    store.report_progress(job.id, c.lease_token, 0.5, "half", worker_id="w")
    assert store.get(job.id).progress["fraction"] == 0.5
    store.fail(job.id, c.lease_token, ERROR, worker_id="w")
    with pytest.raises(LeaseLost):
        store.report_progress(job.id, c.lease_token, 0.75, worker_id="w")
    assert [(a.attempt, a.worker_id) for a in store.attempts(job.id)] == [(1, "w")]
    done = job_in(store, S.Completed, queue="mail")
    history = store.history(60, store.now() - 60, queue="mail")
    assert {kind: sum(b.values()) for kind, b in history.items()} == {
        "enqueued": 2,
        "failed": 1,
        "completed": 1,
    }
    store.delete(job.id, actor="operator:ann")
    assert store.attempts(job.id) == [] and store.get(done.id).status is S.Completed
    store.worker_heartbeat(WorkerInfo("w-1", "host", 1, ["mail"], 1))
    assert store.command_worker("w-1", "quiet", actor="operator:ann").command == "quiet"
    assert store.worker_heartbeat(WorkerInfo("w-1", "host", 1, ["mail"], 1)) == "quiet"
    assert store.command_worker("w-1", "unquiet", actor="operator:ann").command is None
    store.command_worker("w-1", "stop", actor="operator:ann")
    assert store.worker_heartbeat(WorkerInfo("w-1", "host", 2, ["mail"], 1), register=True) is None
    store.clock_offset_s += 31 * 86400
    assert store.trim_history() == 2 * 3  # 3 fields (enqueued, failed, completed) per width
    assert store.history(3600, 0) == {}


def test_wakeups_and_the_notified_claim_on_the_cluster(store: RedisStore) -> None:
    """The wake-up lists of two queues in one blocking pop (one slot), the
    hand-back, and the one-round-trip claim of the job a notice names."""
    wakeups = store.wakeups(["default", "other"])
    try:
        job = store.enqueue("t", queue="other")
        notice = wakeups.wait(2.0)
        assert notice is not None and notice.queue == "other" and notice.job is not None
        wakeups.give_back(notice)
        assert wakeups.wait(2.0) == notice
        [claimed] = store.claim_notified("w", notice)
        assert claimed.id == job.id and claimed.lease_token == 1
    finally:
        wakeups.close()


def test_the_hand_over_to_an_idle_worker_on_the_cluster(store: RedisStore) -> None:
    """The registration, the lease taken in the enqueue and pushed on the
    worker's own list (keys built in the functions, in one slot), and the
    worker's pop of it beside the wake-up lists."""
    wakeups = store.wakeups(["default", "other"], "w-1", 30.0)
    try:
        assert wakeups.wait(0.01) is None
        job = store.enqueue("t", queue="other")
        notice = wakeups.wait(2.0)
        assert notice is not None and [j.id for j in notice.leased] == [job.id]
        assert notice.leased[0] == store.get(job.id)
    finally:
        wakeups.close()


def test_flow_control_on_the_cluster(store: RedisStore) -> None:
    """Limits decided in the claim (concurrency, rate with its retry-after)
    and a dependency released by its parent's ack, in one slot: the flow
    keys (limits, running counts, rate windows, parents and children) are
    built from the prefix like every other key."""
    from store.flow_rules import QueueLimits, Rate
    from store.models import JobSpec

    store.set_queue_limits("lim", QueueLimits(concurrency=2, rate=Rate(3, 60.0)))
    store.enqueue_many([JobSpec("t", {"i": i}, queue="lim", limit_key="k") for i in range(5)])
    first = store.claim("w", ["lim"], 10)
    assert len(first) == 2 and store.claim("w", ["lim"], 10) == []
    assert store.limit_usage("lim").running == 2
    for j in first:
        store.complete(j.id, j.lease_token, None)
    [third] = store.claim("w", ["lim"], 10)
    store.complete(third.id, third.lease_token, None)
    assert store.claim("w", ["lim"], 10) == []
    wait = store.claim_retry_after("w")
    assert wait is not None and 59.0 < wait <= 60.0

    parent = store.enqueue("p")
    child = store.enqueue("c", depends_on=[parent.id])
    assert store.get(child.id).status is S.Scheduled
    [p] = store.claim("w", ["default"], 1)
    store.complete(p.id, p.lease_token, {"n": 1})
    assert store.get(child.id).status is S.Queued
    assert [j.id for j in store.parents(child.id)] == [parent.id]
    batch = store.create_batch([JobSpec("t", None, queue="b")], JobSpec("cb", None, queue="b"))
    [b] = store.claim("w", ["b"], 10)
    store.complete(b.id, b.lease_token, None)
    assert store.get(batch.callback_job_id).status is S.Queued
