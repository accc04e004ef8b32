"""``raise Retry(after=s)`` and ``raise Snooze(after=s)`` from a handler in a
real worker: Retry spends an attempt and waits its own delay; Snooze spends
none, and the snooze past the handler's max_snoozes fails the job."""

from __future__ import annotations

import pytest

from tests.backends import StoreHandle
from tests.conftest import handle_fixture
from tests.workers.procs import Spawner, events, job_is, wait_until
from workers import Retry, Snooze

handle = handle_fixture(["sqlite"])  # the worker's side; the stores have their contract tests


def test_retry_waits_its_own_delay_and_spends_an_attempt(handle: StoreHandle, spawn: Spawner) -> None:
    store = handle.store
    spawn.worker("--concurrency", "1", name="w-r")
    job = store.enqueue("retry_after", {"after": 0.7}, max_retries=3)
    done = wait_until(lambda: job_is(store, job.id, "Completed"), what="retried job completed")
    assert (done.retry_count, done.result["attempt"]) == (1, 1)
    [retry] = events(store, job.id, "retry_scheduled")
    assert retry.message == "Retry: retry 1 in 0.700s"  # its own delay, not the 0.1 s backoff
    [attempt] = store.attempts(job.id)
    assert attempt.error["type"] == "Retry" and "Retry" in attempt.error["traceback"]


def test_snoozes_spend_no_attempt_and_too_many_fail_the_job(handle: StoreHandle, spawn: Spawner) -> None:
    store = handle.store
    spawn.worker("--concurrency", "1", name="w-s")
    ok = store.enqueue("snoozer", {"after": 0.05, "snoozes": 2}, max_retries=0)
    done = wait_until(lambda: job_is(store, ok.id, "Completed"), what="snoozed job completed")
    assert (done.retry_count, done.lease_token) == (0, 3)  # two snoozes, no retry spent
    too_many = store.enqueue("snoozer", {"after": 0.05, "snoozes": 99}, max_retries=5)
    failed = wait_until(lambda: job_is(store, too_many.id, "Failed"), what="the third snooze failed it")
    assert (failed.retry_count, failed.error["type"], failed.lease_token) == (0, "Snooze", 3)


def test_bad_delays_are_refused_at_once() -> None:
    for cls in (Retry, Snooze):
        with pytest.raises(ValueError, match="after"):
            cls(after=-1)
