"""Contract under real concurrency: several processes on one store."""

from __future__ import annotations

from collections import Counter

from store.lifecycle import JobStatus
from tests.backends import StoreHandle
from tests.store.helpers import expire_leases
from tests.store.procs import claim_and_complete, recover_all, run_children

S = JobStatus


def test_eight_processes_claim_each_job_exactly_once(handle: StoreHandle) -> None:
    store = handle.store
    jobs = store.enqueue_many([("t", {"i": i}) for i in range(2000)])
    results = run_children(claim_and_complete, [(handle.url, f"w-{n}") for n in range(8)])
    claims = Counter(job_id for _, claimed, _ in results for job_id, _ in claimed)
    assert len(claims) == 2000
    assert set(claims) == {j.id for j in jobs}
    assert max(claims.values()) == 1
    assert store.counts().by_status["Completed"] == 2000
    assert store.counts().by_status["Queued"] == 0
    workers_used = sum(1 for _, claimed, _ in results if claimed)
    assert workers_used >= 2  # the processes really competed
    assert store.event_counts().get("completion_refused", 0) == 0


def test_five_concurrent_recoverers_recover_each_job_once(handle: StoreHandle) -> None:
    store = handle.store
    store.enqueue_many([("t", {"i": i}) for i in range(1000)])
    claimed = []
    while len(claimed) < 1000:
        claimed += store.claim("w-dead", ["default"], 500, lease_ttl_s=5)
    store.enqueue("live")
    [live] = store.claim("w-live", ["default"], 1, lease_ttl_s=3600)

    expire_leases(store, 10)
    results = run_children(recover_all, [(handle.url, f"rec-{n}", store.clock_offset_s) for n in range(5)])
    recovered = Counter(job_id for _, got, _ in results for job_id in got)
    assert len(recovered) == 1000 and max(recovered.values()) == 1
    assert set(recovered) == {j.id for j in claimed}
    for job in store.list_jobs(status=S.Scheduled, limit=500).items:
        assert (job.retry_count, job.lease_expirations) == (1, 1)
    assert store.counts().by_status["Scheduled"] == 1000
    assert store.event_counts()["lease_expired"] == 1000
    assert store.get(live.id).status is S.InProgress  # a live lease is never touched
    assert store.get(live.id).lease_token == live.lease_token
