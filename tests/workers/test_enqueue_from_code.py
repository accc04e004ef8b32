"""Enqueueing from application code: a handler object that
calls like its function and enqueues itself, ``workers.wait``, and the
documented ``open_store(url).enqueue(...)``, on every backend."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import workers
from store import open_store
from store.models import JobSpec
from tests.backends import StoreHandle
from tests.workers.chain_handlers import countdown
from tests.workers.procs import wait_until
from tests.workers.test_worker_inprocess import make_worker, running
from workers import JobContext, use_store, wait
from workers.enqueueing import default_store
from workers.handlers import get_handler


@pytest.fixture(autouse=True)
def no_process_store() -> Iterator[None]:
    yield
    use_store(None)


def context(n: int) -> JobContext:
    return JobContext("id", "countdown", {"n": n}, None, None, None, 0, "w-test", 1)


def test_a_handler_calls_like_its_function_and_enqueues_with_its_defaults(handle: StoreHandle) -> None:
    store = handle.store
    assert countdown(context(0)) == {"n": 0, "by": "w-test"}
    assert countdown.__name__ == "countdown" and "Count" in (countdown.__doc__ or "")
    assert get_handler("countdown").fn is countdown.__wrapped__
    job = countdown.enqueue({"n": 3}, store=store)
    assert (job.name, job.queue, job.max_retries, job.timeout_seconds) == ("countdown", "chain", 0, 30.0)
    assert job.payload == {"n": 3} and job.status.name == "Queued"
    later = countdown.enqueue({"n": 1}, store=store, queue="other", priority=4, delay_s=60)
    assert (later.queue, later.priority, later.status.name) == ("other", 4, "Scheduled")
    again = countdown.enqueue({"n": 3}, store=store, idempotency_key="k-1")
    assert countdown.enqueue({"n": 3}, store=store, idempotency_key="k-1").id == again.id
    with pytest.raises(TypeError):
        countdown.enqueue({"n": 1}, store=store, no_such_option=1)


def test_enqueue_many_takes_payloads_and_specs(handle: StoreHandle) -> None:
    use_store(handle.store)
    jobs = countdown.enqueue_many(
        [{"n": 0}, {"n": 1}, JobSpec("countdown", {"n": 9}, queue="q9")], priority=2
    )
    assert [(j.payload["n"], j.queue, j.priority) for j in jobs] == [
        (0, "chain", 2),
        (1, "chain", 2),
        (9, "q9", 0),
    ]
    with pytest.raises(ValueError, match="JobSpec for 'other'"):
        countdown.enqueue_many([JobSpec("other")])


def test_wait_returns_the_job_a_worker_completed_and_the_handler_enqueued_itself(handle: StoreHandle) -> None:
    store = handle.store
    use_store(store)  # the handler, run by the in-process worker, enqueues through it
    first = countdown.enqueue({"n": 2})
    with running(make_worker(handle, queues=(("chain", 1),))):
        done = wait(first.id, 30)
        assert done.status.name == "Completed" and done.result == {"n": 2, "by": "w-in"}

        # n=1 may still be running (n=0 is enqueued by its handler): wait for the chain.
        def whole_chain() -> list | None:
            items = store.list_jobs(name="countdown", limit=10).items
            return items if len(items) >= 3 else None

        chain = wait_until(whole_chain, what="the chain of three countdown jobs")
        assert sorted(j.payload["n"] for j in chain) == [0, 1, 2]
        for job in chain:
            assert wait(job, 30).status.name == "Completed"


def test_wait_times_out_and_returns_failed_or_canceled_jobs(handle: StoreHandle) -> None:
    store = handle.store
    job = countdown.enqueue({"n": 0}, store=store)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="still Queued"):
        wait(job.id, 0.3, store=store)
    assert 0.3 <= time.monotonic() - started < 2.0
    store.cancel(job.id, actor="test")
    assert wait(job.id, 0.0, store=store).status.name == "Canceled"


def test_the_default_store_is_the_one_the_environment_names(
    handle: StoreHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEASEHOLD_STORE_URL", handle.url)
    use_store(None)
    opened = default_store()
    assert default_store() is opened and opened is not handle.store  # opened once, lazily
    job = countdown.enqueue({"n": 5})
    assert handle.store.get(job.id).payload == {"n": 5}
    assert workers.wait is wait and workers.use_store is use_store


def test_the_design_example_works_as_documented(handle: StoreHandle) -> None:
    jobs = open_store(handle.url, handle.store.settings)
    try:
        job = jobs.enqueue("index-source", {"path": "a.py"}, queue="default", max_retries=3, delay_s=0.0)
        assert (job.status.name, job.max_retries) == ("Queued", 3)
        later = jobs.enqueue("index-source", {"path": "b.py"}, delay_s=30.0)
        assert later.status.name == "Scheduled" and later.retry_delay_until is not None
        batch = jobs.enqueue_many([("index-source", {"path": p}) for p in ("c.py", "d.py")])
        assert [j.payload["path"] for j in batch] == ["c.py", "d.py"]
        assert handle.store.get(batch[1].id).name == "index-source"
    finally:
        jobs.close()


def test_a_handler_enqueues_with_run_at_and_an_expiry(handle: StoreHandle) -> None:
    from datetime import UTC, datetime, timedelta

    store = handle.store
    at = datetime.fromtimestamp(store.now() + 60, tz=UTC)
    job = countdown.enqueue({"n": 1}, store=store, run_at=at, expires_in_s=120)
    assert job.status.name == "Scheduled" and job.expires_at is not None
    assert job.retry_delay_until is not None and job.retry_delay_until >= at - timedelta(milliseconds=1)
    store.clock_offset_s += 200  # past both: due, then expired before any worker took it
    assert store.claim("w-1", [job.queue]) == []
    expired = store.get(job.id)
    assert expired.status.name == "Canceled" and expired.error is not None
    assert expired.error["type"] == "Expired"
