"""Contract: enqueue, get, list with filters and cursor paging, counts, events."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from store.base import JobStore
from store.errors import JobNotFound, ValidationError
from store.lifecycle import JobStatus
from store.models import JobSpec
from tests.store.helpers import job_in

S = JobStatus


def test_enqueue_and_get_round_trip(store: JobStore) -> None:
    payload = {"path": "a.py", "nested": {"list": [1, 2.5, None, "é"]}}
    job = store.enqueue(
        "index-source",
        payload,
        queue="files",
        priority=5,
        max_retries=7,
        timeout_s=12.5,
        lease_ttl_s=3.0,
        headers={"X-Request-Id": "r1"},
        route_params={"id": "42"},
        query_params={"q": ["a", "b"]},
    )
    got = store.get(job.id)
    assert got == job
    assert uuid.UUID(got.id)
    assert (got.name, got.queue, got.status, got.priority) == ("index-source", "files", S.Queued, 5)
    assert got.payload == payload
    assert (got.max_retries, got.timeout_seconds, got.lease_ttl_seconds) == (7, 12.5, 3.0)
    assert got.headers == {"X-Request-Id": "r1"}
    assert got.route_params == {"id": "42"} and got.query_params == {"q": ["a", "b"]}
    assert (got.retry_count, got.lease_expirations, got.lease_token, got.worker_id) == (0, 0, 0, None)
    assert got.created_at is not None and got.created_at.tzinfo is not None
    assert got.result is None and got.error is None


def test_defaults_come_from_settings(store: JobStore) -> None:
    job = store.enqueue("t")
    assert job.payload is None
    assert job.queue == "default"
    assert job.max_retries == store.settings.max_retries
    assert job.timeout_seconds == store.settings.job_timeout_s
    assert job.lease_ttl_seconds is None


def test_delayed_job_is_scheduled_for_later(store: JobStore) -> None:
    job = store.enqueue("t", delay_s=60)
    assert job.status is S.Scheduled
    assert job.retry_delay_until is not None
    assert job.retry_delay_until - job.created_at == pytest.approx(
        timedelta(seconds=60), abs=timedelta(seconds=1)
    )
    assert store.claim("w", ["default"], 10) == []
    store.clock_offset_s += 61
    assert [j.id for j in store.claim("w", ["default"], 10)] == [job.id]


def test_get_unknown_raises(store: JobStore) -> None:
    with pytest.raises(JobNotFound):
        store.get(str(uuid.uuid4()))


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (JobSpec(""), "name"),
        (JobSpec("t", queue=""), "queue"),
        (JobSpec("t", priority=10**9), "priority"),
        (JobSpec("t", max_retries=-1), "max_retries"),
        (JobSpec("t", timeout_s=float("nan")), "timeout_s"),
        (JobSpec("t", delay_s=-1), "delay_s"),
        (JobSpec("t", lease_ttl_s=0), "lease_ttl_s"),
        (JobSpec("t", payload={"x": object()}), "payload"),
        (JobSpec("x" * 201), "name"),
        (JobSpec("t", payload={"a": "nul\x00"}), "payload"),
        (JobSpec("t\x00"), "name"),
    ],
)
def test_bad_spec_is_refused_and_nothing_written(store: JobStore, spec: JobSpec, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        store.enqueue_idempotent(spec)
    assert err.value.field == field
    with pytest.raises(ValidationError):
        store.enqueue_many([JobSpec("ok"), spec])  # validated before anything is written
    assert store.counts().by_status == {s.name: 0 for s in S}


def test_idempotency_key_returns_first_job(store: JobStore) -> None:
    first, created = store.enqueue_idempotent(JobSpec("t", {"n": 1}, idempotency_key="k-1"))
    again, created_again = store.enqueue_idempotent(JobSpec("t", {"n": 2}, idempotency_key="k-1"))
    assert created and not created_again
    assert again.id == first.id and again.payload == {"n": 1}
    assert store.counts().by_status["Queued"] == 1


def test_enqueue_many(store: JobStore) -> None:
    specs = [("t", {"i": i}) for i in range(2500)] + [JobSpec("u", queue="other")]
    jobs = store.enqueue_many(specs)
    assert len(jobs) == 2501 and len({j.id for j in jobs}) == 2501
    assert [j.payload for j in jobs[:3]] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert [store.get(j.id) for j in (jobs[0], jobs[-1])] == [jobs[0], jobs[-1]]
    counts = store.counts()
    assert counts.by_status["Queued"] == 2501
    assert counts.by_queue == {"default": {"Queued": 2500}, "other": {"Queued": 1}}
    delayed = store.enqueue_many(
        [JobSpec("d", {"k": [1, {"b": 2, "a": 1}]}, delay_s=60, idempotency_key="k-1")]
    )
    assert delayed[0] == store.get(delayed[0].id) and delayed[0].status is S.Scheduled
    assert delayed[0].retry_delay_until - delayed[0].created_at == timedelta(seconds=60)


def test_what_enqueue_returns_is_what_get_reads_with_every_option(store: JobStore) -> None:
    spec = JobSpec(
        "t",
        {"k": [1, {"b": 2}], "s": "é"},
        queue="q",
        priority=7,
        max_retries=9,
        timeout_s=12.5,
        lease_ttl_s=4.0,
        idempotency_key="k-all",
        headers={"X-A": "1"},
        route_params={"id": 3},
        query_params={"q": "x"},
    )
    [one] = store.enqueue_many([spec])
    # ints beside the defaults' floats in one bulk (PostgreSQL sends each column as one array)
    mixed = store.enqueue_many(
        [JobSpec("t"), JobSpec("t", delay_s=5), JobSpec("t", timeout_s=10, lease_ttl_s=3)]
    )
    for job in (one, *mixed):
        assert job == store.get(job.id)


def test_list_filters_and_cursor_paging(store: JobStore) -> None:
    a = [store.enqueue("alpha", {"i": i}, queue="qa") for i in range(7)]
    b = [store.enqueue("beta", {"i": i}, queue="qb") for i in range(5)]
    claimed = store.claim("w", ["qb"], 2)
    assert len(claimed) == 2

    seen, cursor = [], None
    while True:
        page = store.list_jobs(limit=5, cursor=cursor)
        seen.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert len(seen) == 12 and len({j.id for j in seen}) == 12
    stamps = [(j.last_updated_at, j.id) for j in seen]
    assert stamps == sorted(stamps, reverse=True)

    assert {j.id for j in store.list_jobs(queue="qa", limit=50).items} == {j.id for j in a}
    assert {j.id for j in store.list_jobs(name="beta", limit=50).items} == {j.id for j in b}
    in_progress = store.list_jobs(status=S.InProgress, limit=50).items
    assert {j.id for j in in_progress} == {j.id for j in claimed}
    assert store.list_jobs(status=S.Queued, queue="qb", limit=50).next_cursor is None
    assert len(store.list_jobs(status=S.Queued, queue="qb", limit=50).items) == 3

    oldest, cursor = [], None
    while True:
        page = store.list_jobs(limit=4, cursor=cursor, order="asc")
        oldest.extend(page.items)
        if (cursor := page.next_cursor) is None:
            break
    assert [j.id for j in oldest] == [j.id for j in reversed(seen)]
    first_three = sorted(a, key=lambda j: (j.last_updated_at, j.id))[:3]
    assert [j.id for j in store.list_jobs(queue="qa", limit=3, order="asc").items] == [
        j.id for j in first_three
    ]

    with pytest.raises(ValidationError):
        store.list_jobs(order="sideways")
    with pytest.raises(ValidationError):
        store.list_jobs(cursor="not-a-cursor!")
    with pytest.raises(ValidationError):
        store.list_jobs(limit=0)


def test_counts_follow_every_status(store: JobStore) -> None:
    # Claiming statuses first: job_in claims every due job of its queue.
    for status in (S.InProgress, S.Completed, S.Failed, S.Canceled, S.Queued, S.Scheduled):
        job_in(store, status, queue="q1")
    job_in(store, S.Queued, queue="q2")
    counts = store.counts()
    assert counts.by_status == {s.name: (2 if s is S.Queued else 1) for s in S}
    assert counts.by_queue["q2"] == {"Queued": 1}
    assert counts.by_queue["q1"] == {s.name: 1 for s in S}
    assert counts.to_json()["counts"]["InProgress"] == 1


def test_events_record_the_timeline(store: JobStore) -> None:
    job = store.enqueue("t")
    [claimed] = store.claim("w-1", ["default"], 1)
    store.complete(job.id, claimed.lease_token, {"n": 3}, worker_id="w-1")
    events = store.events(job.id)
    assert [e.kind for e in events] == ["enqueued", "claimed", "completed"]
    assert events[1].from_status is S.Queued and events[1].to_status is S.InProgress
    assert events[1].actor == "w-1" and events[1].token == 1
    assert events[0].at <= events[1].at <= events[2].at
    kinds = store.event_counts()
    assert kinds["enqueued"] == 1 and kinds["claimed"] == 1 and kinds["completed"] == 1


def test_purge_removes_old_finished_jobs_only(store: JobStore) -> None:
    done = job_in(store, S.Completed)
    waiting = job_in(store, S.Queued)
    assert store.purge(older_than_s=3600) == 0
    store.clock_offset_s += 7200
    assert store.purge(older_than_s=3600) == 1
    with pytest.raises(JobNotFound):
        store.get(done.id)
    assert store.get(waiting.id).status is S.Queued
    assert store.counts().by_status["Completed"] == 0
    assert store.events(done.id) == []


@pytest.mark.parametrize("payload", [1, 1.5, -7, "1", "text", True, None, [1, "a"], {"k": [None]}])
def test_any_json_payload_round_trips(store: JobStore, payload: object) -> None:
    job = store.enqueue("t", payload)
    assert store.get(job.id).payload == payload
    [claimed] = store.claim("w", ["default"], 1)
    assert claimed.payload == payload
    assert store.complete(job.id, claimed.lease_token, payload).result == payload
    assert store.get(job.id).result == payload
