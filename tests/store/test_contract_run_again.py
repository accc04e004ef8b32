"""Contract: a handler's Retry (a retry spent, its own delay) and Snooze (none
spent, at most max_snoozes times), applied through the FAIL operation and
fenced by the lease token like any nack, on every store."""

from __future__ import annotations

import pytest

from store.base import JobStore
from store.errors import LeaseLost
from store.lifecycle import JobStatus, RunAgain

S = JobStatus
RETRY = {"type": "Retry", "message": "retry requested", "traceback": None}
SNOOZE = {"type": "Snooze", "message": "snoozed", "traceback": None}


def _wait_s(job) -> float:
    return (job.retry_delay_until - job.last_updated_at).total_seconds()


def test_retry_spends_a_retry_and_waits_its_own_delay(store: JobStore) -> None:
    job = store.enqueue("t", max_retries=1)
    [c] = store.claim("w", ["default"], 1)
    retried = store.fail(job.id, c.lease_token, RETRY, again=RunAgain(30.0), worker_id="w")
    assert (retried.status, retried.retry_count, retried.error["type"]) == (S.Scheduled, 1, "Retry")
    assert _wait_s(retried) == pytest.approx(30.0, abs=0.5)  # not the backoff (0.1 s here)
    assert store.claim("w", ["default"], 1) == []
    store.clock_offset_s += 31
    [c] = store.claim("w", ["default"], 1)
    final = store.fail(job.id, c.lease_token, RETRY, again=RunAgain(30.0))
    assert (final.status, final.retry_count) == (S.Failed, 1)  # retries spent
    assert [e.kind for e in store.events(job.id)].count("retry_scheduled") == 1


def test_snooze_spends_no_retry_up_to_max_snoozes_then_fails(store: JobStore) -> None:
    job = store.enqueue("t", max_retries=0)
    for n in range(2):
        [c] = store.claim("w", ["default"], 1)
        snoozed = store.fail(job.id, c.lease_token, SNOOZE, again=RunAgain(60.0, snooze=True, max_snoozes=2))
        assert (snoozed.status, snoozed.retry_count) == (S.Scheduled, 0), n
        assert _wait_s(snoozed) == pytest.approx(60.0, abs=0.5)
        assert store.claim("w", ["default"], 1) == []
        store.clock_offset_s += 61
    events = [e for e in store.events(job.id) if e.kind == "retry_scheduled"]
    assert len(events) == 2 and "no retry spent" in (events[-1].message or "")
    [c] = store.claim("w", ["default"], 1)
    final = store.fail(job.id, c.lease_token, SNOOZE, again=RunAgain(60.0, snooze=True, max_snoozes=2))
    assert (final.status, final.retry_count, final.error["type"]) == (S.Failed, 0, "Snooze")
    assert [a.error["type"] for a in store.attempts(job.id)] == ["Snooze"] * 3


def test_retry_and_snooze_are_fenced_by_the_token(store: JobStore) -> None:
    job = store.enqueue("t")
    [old] = store.claim("w-1", ["default"], 1)
    store.release(job.id, old.lease_token, worker_id="w-1")
    [new] = store.claim("w-2", ["default"], 1)
    for error, again in ((RETRY, RunAgain(5.0)), (SNOOZE, RunAgain(5.0, snooze=True))):
        with pytest.raises(LeaseLost):
            store.fail(job.id, old.lease_token, error, again=again, worker_id="w-1")
    held = store.get(job.id)
    assert (held.status, held.lease_token, held.retry_count) == (S.InProgress, new.lease_token, 0)
    assert store.attempts(job.id) == []
