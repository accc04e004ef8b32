"""``leasehold db upgrade --shards N`` (store/redis/shards/reshard.py): a
populated unsharded namespace moved onto N shards, on one server and on a
3-master cluster. Old jobs keep their ids and are read, listed, claimed,
acked and recovered through the sharded store with new ones; a move
refuses with one line while workers are alive; one stopped half way is
finished by running the command again."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from store import open_store
from store.errors import JobNotFound
from store.flow_rules import QueueLimits
from store.lifecycle import JobStatus
from store.models import JobSpec
from store.records import WorkerInfo
from store.redis.shards import reshard as reshard_module
from store.redis.shards import shard_of_queue
from store.schema_version import SchemaMismatch, SchemaUpgradeFailed, check_schema, upgrade_schema
from tests.backends import delete_redis_prefix, redis_url_with_prefix

SHARDS = 3
#: Queues that fall on every one of the 3 shards.
QUEUES = ["q0", "q1", "q2", "q3", "q4", "q5"]
assert {shard_of_queue(q, SHARDS) for q in QUEUES} == set(range(SHARDS))


@pytest.fixture(params=["server", "cluster"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "server":
        url, prefix = redis_url_with_prefix()
        yield url
        delete_redis_prefix(url, prefix)  # and its shards' ({prefix:k})
    else:
        cluster = request.getfixturevalue("redis_cluster")
        url, prefix = cluster.url_with_prefix()
        yield url
        cluster.delete_prefix(prefix)


def populate(store) -> dict[str, object]:
    """Jobs in every state the move must carry, on queues of every shard."""
    made: dict[str, object] = {}
    for q in ("q2", "q3", "q4"):
        store.enqueue("t", {"to": "claim"}, queue=q)
    [done] = store.claim("w", ["q2"], 1)
    store.complete(done.id, done.lease_token, {"ok": 1})
    made["completed"] = done.id
    [dead] = store.claim("w", ["q3"], 1)
    store.fail(dead.id, dead.lease_token, {"type": "Boom", "message": "x"}, permanent=True)
    made["dead"] = dead.id
    [held] = store.claim("gone-worker", ["q4"], 1, lease_ttl_s=5)
    made["held"] = (held.id, held.lease_token)
    for q in QUEUES:
        made[f"queued {q}"] = [store.enqueue("t", {"q": q, "n": n}, queue=q).id for n in range(3)]
    made["scheduled"] = store.enqueue("t", None, queue="q1", delay_s=3600).id
    made["keyed"] = store.enqueue("t", None, queue="q5", idempotency_key="order-7").id
    parent = store.enqueue("p", None, queue="q0")
    made["parent"] = parent.id
    made["child"] = store.enqueue("c", None, queue="q0", depends_on=[parent.id]).id
    batch = store.create_batch(
        [JobSpec("b", {"n": n}, queue="q1") for n in range(2)], JobSpec("cb", None, queue="q1")
    )
    made["batch"] = batch.id
    store.set_queue_limits("q2", QueueLimits(concurrency=5), actor="operator:test")
    store.pause_queue("q3", actor="operator:test")
    return made


def snapshot(store, ids: list[str]) -> dict[str, object]:
    jobs = {i: store.get(i) for i in ids}
    return {
        "jobs": {i: (j.status, j.queue, j.retry_count, j.lease_token, j.payload) for i, j in jobs.items()},
        "counts": store.counts().by_queue,
        "listing": [j.id for j in store.list_jobs(limit=500).items],
        "queued": [j.id for j in store.list_jobs(status=JobStatus.Queued, limit=500).items],
    }


def all_ids(made: dict[str, object]) -> list[str]:
    out: list[str] = []
    for value in made.values():
        if isinstance(value, list):
            out += value
        elif isinstance(value, tuple):
            out.append(value[0])
        elif isinstance(value, str) and value != made["batch"]:
            out.append(value)
    return out


def test_upgrade_moves_a_populated_namespace_and_serves_old_and_new_jobs(url: str) -> None:
    with open_store(url) as unsharded:
        made = populate(unsharded)
        ids = (
            all_ids(made)
            + unsharded.get_batch(made["batch"]).job_ids
            + [unsharded.get_batch(made["batch"]).callback_job_id]
        )
        before = snapshot(unsharded, ids)
        audit_before = len(unsharded.audit_page(100).items)

    line = upgrade_schema(url, shards=SHARDS)
    assert f"onto {SHARDS} shards" in line and "\n" not in line
    with pytest.raises(SchemaMismatch) as refused, open_store(url) as old:  # the old URL refuses, one line
        check_schema(old, url)
    assert f"add shards={SHARDS}" in str(refused.value)
    assert "already at version" in upgrade_schema(url, shards=SHARDS)  # a second run moves nothing

    with open_store(f"{url}&shards={SHARDS}") as store:
        check_schema(store)
        assert snapshot(store, ids) == before
        for q in QUEUES:  # each old job sits on its queue's shard
            home = store.shards[shard_of_queue(q, SHARDS)]
            assert all(home.get(i).queue == q for i in made[f"queued {q}"])
        assert store.queue_limits()["q2"].concurrency == 5
        assert [s.name for s in store.queue_states() if s.paused] == ["q3"]
        assert len(store.audit_page(100).items) == audit_before
        again = store.enqueue("t", None, queue="q5", idempotency_key="order-7")
        assert again.id == made["keyed"]  # the key still names its old job
        batch = store.get_batch(made["batch"])
        assert batch.counts.get("Queued") == 2

        store.clock_offset_s = 10  # the gone worker's lease (5 s) has ended
        recovered = store.recover_expired()
        assert [r.job_id for r in recovered.recovered] == [made["held"][0]]
        with pytest.raises(Exception, match="lease"):
            store.complete(made["held"][0], made["held"][1])  # its late ack is refused by the token

        new = {q: store.enqueue("t", {"new": q}, queue=q).id for q in QUEUES}
        store.resume_queue("q3", actor="operator:test")
        finished: set[str] = set()
        for _ in range(20):
            got = store.claim("w2", [*QUEUES], 50)
            if not got:
                break
            for job in got:
                store.complete(job.id, job.lease_token)
                finished.add(job.id)
        assert set(new.values()) <= finished
        for q in QUEUES:
            assert set(made[f"queued {q}"]) <= finished
        assert {made["parent"], made["child"], made["scheduled"]} - finished == {made["scheduled"]}
        assert store.get(made["child"]).status is JobStatus.Completed  # released by its old parent
        assert store.get(batch.callback_job_id).status is JobStatus.Completed
        assert store.get(made["dead"]).status is JobStatus.Failed
        with pytest.raises(JobNotFound):
            store.get("01900000-0000-7000-8000-000000000000")


def test_upgrade_refuses_while_a_worker_is_alive_and_writes_nothing(url: str) -> None:
    with open_store(url) as unsharded:
        job = unsharded.enqueue("t", None, queue="q0")
        now = datetime.fromtimestamp(unsharded.now(), UTC)
        info = WorkerInfo("w-1", "host-a", 1, ["q0"], 1, started_at=now, last_seen_at=now)
        unsharded.worker_heartbeat(info, register=True)
    with pytest.raises(SchemaUpgradeFailed) as refused:
        upgrade_schema(url, shards=SHARDS)
    message = str(refused.value)
    assert "1 workers of the unsharded namespace beat in the last 600 s" in message
    assert "host-a" in message and "stop them first" in message
    assert "\n" not in message
    with open_store(url) as unsharded:
        assert unsharded.get(job.id).status is JobStatus.Queued
    with open_store(f"{url}&shards={SHARDS}") as store:
        assert sum(store.counts().by_status.values()) == 0


def test_a_move_stopped_half_way_is_finished_by_running_it_again(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_store(url) as unsharded:
        made = populate(unsharded)
        ids = all_ids(made)
        before = snapshot(unsharded, ids)
    monkeypatch.setattr(reshard_module, "BATCH", 7)
    real = reshard_module.copy_whole
    calls = {"n": 0}

    def dies_at_the_fourth_round(client, pairs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return real(client, pairs)

    monkeypatch.setattr(reshard_module, "copy_whole", dies_at_the_fourth_round)
    with pytest.raises(KeyboardInterrupt):
        upgrade_schema(url, shards=SHARDS)
    monkeypatch.setattr(reshard_module, "copy_whole", real)
    rounds: list[str] = []
    assert "moved the unsharded namespace" in upgrade_schema(url, shards=SHARDS, progress=rounds.append)
    assert len(rounds) > 3 and rounds[-1].startswith("copied ")  # a line a round of 7 keys
    with open_store(f"{url}&shards={SHARDS}") as store:
        assert snapshot(store, ids) == before


def test_a_child_whose_parent_would_sit_on_another_shard_is_refused(url: str) -> None:
    first, other = next(
        (a, b) for a in QUEUES for b in QUEUES if shard_of_queue(a, 3) != shard_of_queue(b, 3)
    )
    with open_store(url) as unsharded:
        parent = unsharded.enqueue("p", None, queue=first)
        child = unsharded.enqueue("c", None, queue=other, depends_on=[parent.id])
    with pytest.raises(SchemaUpgradeFailed) as refused:
        upgrade_schema(url, shards=SHARDS)
    assert f"job {child.id} waits for job {parent.id}" in str(refused.value)
    assert "let the parent finish first" in str(refused.value)
