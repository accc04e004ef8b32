"""The Redis functions' clock texts (lua/lib/clock.lua) and the rank built
from them (lua/lib/job.lua ``rank``): with no clock offset the times are
TIME's own digits ("<seconds>.<6 digits>", no number formatting), with an
offset the 17-digit text of the sum; either way a job's stored times read
back as the times the store returns, its listing score is those times in
whole microseconds, and its rank is priority, due time and id in claim
order, as the Python side parses it (store/redis/keys.py). The leases zset
is kept a skiplist by a padding member that no reader takes for a job."""

from __future__ import annotations

import re

import pytest

from store.lifecycle import JobStatus
from store.models import Lease
from store.redis.keys import LEASES_PAD, RANK_HEAD, rank_job_id
from store.redis.store import RedisStore
from tests.conftest import handle_fixture
from tests.store.helpers import expire_leases

handle = handle_fixture(["redis"])


def expected_rank(priority: int, due: float, job_id: str) -> str:
    return f"{1_000_000 - priority:07d}{round(due * 1_000_000):017d}:{job_id}"


@pytest.mark.parametrize("offset_s", [0.0, 3600.25])
def test_times_ranks_and_scores_agree(store: RedisStore, offset_s: float) -> None:
    store.clock_offset_s = offset_s
    jobs = [
        store.enqueue("t", priority=priority, delay_s=delay) for priority in (0, 7, -3) for delay in (0, 5.5)
    ]
    client = store._client
    for job in jobs:
        stored = client.hgetall(store.keys.job(job.id))
        # layout 6: no id, no last_updated_at of an unchanged job, no due_at without a delay
        assert "id" not in stored and "last_updated_at" not in stored
        assert ("due_at" in stored) == (job.status is JobStatus.Scheduled)
        created, due = stored["created_at"], stored.get("due_at", stored["created_at"])
        if offset_s == 0:
            assert re.fullmatch(r"\d{10}\.\d{6}", created), created
        assert float(created) == job.created_at.timestamp()
        assert stored["rank"] == expected_rank(job.priority, float(due), job.id)
        assert len(stored["rank"]) == RANK_HEAD + 1 + len(job.id) and rank_job_id(stored["rank"]) == job.id
        status = stored["status"]
        score = client.zscore(store.keys.by_queue(JobStatus(int(status)), "default"), job.id)
        assert score == round(float(created) * 1_000_000)
    ready = client.zrange(store.keys.ready("default"), 0, -1)
    undelayed = sorted(jobs[::2], key=lambda j: (-j.priority, j.id))  # delay 0: every other job
    assert [rank_job_id(m) for m in ready] == [j.id for j in undelayed]


def test_the_leases_zset_stays_a_skiplist_and_its_padding_is_never_a_job(store: RedisStore) -> None:
    """One claim pads the leases zset (LEASES_PAD at +inf): a skiplist from
    then on, even with one lease or none; counts, listings and recovery of
    InProgress jobs never see the padding."""
    client = store._client
    store.enqueue_many([("t", {"i": i}) for i in range(3)])
    held = store.claim("w", ["default"], 3)
    assert client.object("encoding", store.keys.leases) == "skiplist"
    assert client.zscore(store.keys.leases, LEASES_PAD) == float("inf")
    for job in held[1:]:
        store.complete(job.id, job.lease_token, None)
    assert client.object("encoding", store.keys.leases) == "skiplist"  # one lease left
    assert store.count_jobs(JobStatus.InProgress) == 1
    assert [j.id for j in store.list_jobs(status=JobStatus.InProgress).items] == [held[0].id]
    expire_leases(store)
    assert store.expired_lease_count() == 1
    report = store.recover_expired(10)
    assert [r.job_id for r in report.recovered] == [held[0].id] and not report.failed
    assert store.count_jobs(JobStatus.InProgress) == 0 and store.expired_lease_count() == 0


def test_enqueue_passes_only_the_values_a_job_has(store: RedisStore) -> None:
    """A job's ARGV values: status, delay, the fixed fields, the letters of its
    optional values, those values (codec.enqueue_values); the hash holds
    exactly the fields given, whichever subset and in whatever mix."""
    from store.redis import codec

    plain = store.enqueue("t")
    stored = store._client.hgetall(store.keys.job(plain.id))
    assert set(codec.ENQUEUE_OPTIONAL) & set(stored) == set()
    values = codec.enqueue_values(
        {"id": "i", "name": "n", "queue": "q", "max_retries": "3", "timeout_seconds": "1.0"}, 100, "0.0", None
    )
    assert values == [100, "0.0", "i", "n", "q", "3", "1.0", ""]

    full = store.enqueue(
        "t", {"a": 1}, queue="q2", priority=4, lease_ttl_s=9.0, idempotency_key="k1", headers={"h": "v"},
        unique_key="u1", unique_for=60.0,
    )  # fmt: skip
    some = store.enqueue("t", None, queue="q2", headers={"x": "y"}, unique_key="u2")
    for job, present in ((full, {"priority", "lease_ttl_seconds", "idempotency_key", "payload", "headers"}),
                         (some, {"headers"})):  # fmt: skip
        stored = store._client.hgetall(store.keys.job(job.id))
        assert set(codec.ENQUEUE_OPTIONAL) & set(stored) == present | {"unique_key"}
        assert store.get(job.id) == job
    assert float(store._client.hget(store.keys.unique_until, "u1")) > full.created_at.timestamp() + 59
    [first] = store.claim("w", ["q2"])
    assert (first.id, first.priority, first.lease_ttl_seconds) == (full.id, 4, 9.0)


def test_a_claim_writes_no_implied_stamp_and_keeps_the_rank(store: RedisStore) -> None:
    """Layout 6: a claim leaves last_heartbeat_at out (its start is its first
    heartbeat), keeps the rank it no longer needs (a ZREM of it finds
    nothing) and deletes no field the hash lacks; the job reads as before,
    and after a heartbeat the heartbeat's time. An ended lease keeps its
    lease_expires_at, read as None."""
    job = store.enqueue("t")
    key, client = store.keys.job(job.id), store._client
    rank = client.hget(key, "rank")
    [held] = store.claim("w", ["default"], 1)
    stored = client.hgetall(key)
    assert "last_heartbeat_at" not in stored and stored["rank"] == rank
    assert held.last_heartbeat_at == held.started_at and store.get(job.id) == held
    store.clock_offset_s += 5
    store.heartbeat("w", [Lease(job.id, held.lease_token)])
    beat = store.get(job.id).last_heartbeat_at
    assert beat is not None and (beat - held.started_at).total_seconds() == pytest.approx(5, abs=1)
    store.cancel(job.id)
    canceled = store.get(job.id)
    assert canceled.status is JobStatus.Canceled and canceled.lease_expires_at is None
    assert "lease_expires_at" in client.hgetall(key)  # kept, read only while InProgress
    assert client.zscore(store.keys.ready("default"), rank) is None
