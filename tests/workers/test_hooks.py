"""Hooks with a recording receiver: the lifecycle signals of jobs enqueued
from code and run by a worker (in this process, so the receivers see them),
middleware around each run (seeing the handler's exception), and a W3C
traceparent carried from an API request to the run."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

import tests.handlers as th
from leasehold.hooks import remove_middleware
from tests.backends import StoreHandle
from tests.conftest import handle_fixture
from tests.web.conftest import OPERATOR, api_app_for
from tests.workers.test_worker_inprocess import make_worker
from workers import (
    job_enqueued,
    job_failed,
    job_retry_scheduled,
    job_started,
    job_succeeded,
    use_middleware,
)

handle = handle_fixture(["sqlite"])  # hooks live in the worker; the stores have their contract tests
SIGNALS = {
    "enqueued": job_enqueued,
    "started": job_started,
    "succeeded": job_succeeded,
    "retry_scheduled": job_retry_scheduled,
    "failed": job_failed,
}


@pytest.fixture
def recorded() -> Iterator[list[tuple[str, str, dict[str, Any]]]]:
    seen: list[tuple[str, str, dict[str, Any]]] = []
    receivers = {}
    for kind, signal in SIGNALS.items():

        def receiver(sender: str, kind: str = kind, **kw: Any) -> None:
            seen.append((kind, sender, kw))

        receivers[kind] = receiver
        signal.connect(receiver)
    yield seen
    for kind, signal in SIGNALS.items():
        signal.disconnect(receivers[kind])


@pytest.fixture
def middleware() -> Iterator[list[tuple[str, str, Any]]]:
    runs: list[tuple[str, str, Any]] = []

    @contextlib.contextmanager
    def record(ctx: Any) -> Iterator[None]:
        runs.append(("enter", ctx.job_id, dict(ctx.headers or {})))
        try:
            yield
        except Exception as exc:
            runs.append(("raised", ctx.job_id, type(exc).__name__))
            raise
        runs.append(("exit", ctx.job_id, None))

    use_middleware(record)
    yield runs
    remove_middleware(record)


def test_signals_follow_a_job_from_enqueue_to_its_outcome(handle: StoreHandle, recorded, middleware) -> None:
    store = handle.store
    ok = th.noop.enqueue(store=store)
    retried = th.boom.enqueue(store=store, max_retries=1)
    boom = th.boom.enqueue(store=store, max_retries=0)
    assert make_worker(handle, burst=True, concurrency=1).run() == 0  # burst: the retry is left waiting

    def kinds(job_id: str) -> list[str]:
        return [kind for kind, _, kw in recorded if kw["job"].id == job_id]

    assert kinds(ok.id) == ["enqueued", "started", "succeeded"]
    [succeeded] = [kw for kind, _, kw in recorded if kind == "succeeded"]
    assert succeeded["result"]["worker"] == "w-in" and 0 <= succeeded["run_time_s"] < 5
    retry = ["enqueued", "started", "retry_scheduled"]  # then, if it came due before the burst ended:
    assert kinds(retried.id) in (retry, [*retry, "started", "failed"])
    assert kinds(boom.id) == ["enqueued", "started", "failed"]
    failed = next(kw for kind, _, kw in recorded if kind == "failed" and kw["job"].id == boom.id)
    assert failed["error"]["type"] == "ValueError" and failed["job"].status.name == "Failed"
    assert {sender for _, sender, kw in recorded if kw["job"].id == boom.id} == {"boom"}
    assert [(e, j) for e, j, _ in middleware if j == ok.id] == [("enter", ok.id), ("exit", ok.id)]
    assert ("raised", boom.id, "ValueError") in middleware


def test_a_failing_receiver_changes_no_outcome(handle: StoreHandle) -> None:
    def broken(sender: str, **kw: Any) -> None:
        raise RuntimeError("hook bug")

    job_succeeded.connect(broken)
    try:
        job = th.noop.enqueue(store=handle.store)
        assert make_worker(handle, burst=True).run() == 0
    finally:
        job_succeeded.disconnect(broken)
    assert handle.store.get(job.id).status.name == "Completed"


def test_a_traceparent_at_enqueue_reaches_the_run(handle: StoreHandle, recorded, middleware) -> None:
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    client = api_app_for(handle).test_client()
    made = client.post("/api/jobs", json={"name": "noop"}, headers={**OPERATOR, "traceparent": parent})
    assert made.status_code == 202
    assert handle.store.get(made.json["id"]).headers == {"traceparent": parent}
    assert [kind for kind, _, kw in recorded] == ["enqueued"]
    assert make_worker(handle, burst=True).run() == 0
    [(_, _, headers)] = [m for m in middleware if m[0] == "enter"]
    assert headers == {"traceparent": parent}
