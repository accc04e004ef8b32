"""Contract: text that reaches a store is clean at the boundary, and a
database error is an outage only when it is one, on every store.

A NUL (which PostgreSQL's text and JSONB cannot hold) in a handler's result
is refused with ValidationError and nothing is written; in an error or a
progress message it is replaced by U+FFFD, so the failure or the report is
still recorded (store/spec.py). Search criteria with a NUL are refused.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from store.base import JobStore
from store.errors import StoreUnavailable, ValidationError
from store.lifecycle import JobStatus
from store.spec import NUL_REPLACEMENT
from tests.backends import StoreHandle
from tests.store.helpers import job_in

S = JobStatus
R = NUL_REPLACEMENT


def test_nul_in_a_progress_message_is_replaced_and_the_report_written(store: JobStore) -> None:
    job = job_in(store, S.InProgress)
    store.report_progress(job.id, job.lease_token, 0.5, "a\x00b")
    [refused] = store.report_progress_many([(job.id, job.lease_token, 0.75, "\x00")])
    assert refused is None
    progress = store.get(job.id).progress
    assert progress is not None and (progress["fraction"], progress["message"]) == (0.75, R)


@pytest.mark.parametrize("result", ["a\x00b", {"x": "a\x00"}, {"k\x00": 1}, [["\x00"]]])
def test_nul_in_a_result_is_refused_and_nothing_written(store: JobStore, result: object) -> None:
    job = job_in(store, S.InProgress)
    with pytest.raises(ValidationError) as raised:
        store.complete(job.id, job.lease_token, result)
    assert raised.value.field == "result"
    assert store.get(job.id).status is S.InProgress


def test_one_nul_in_a_batch_of_acks_refuses_the_batch_before_writing(store: JobStore) -> None:
    store.enqueue_many([("t", {"n": n}) for n in range(3)])
    claimed = store.claim("w", ["default"], 3)
    acks = [(j.id, j.lease_token, {"n": "a\x00"} if i == 1 else {"n": i}) for i, j in enumerate(claimed)]
    with pytest.raises(ValidationError):
        store.complete_many(acks, return_jobs=False)
    assert {store.get(j.id).status for j in claimed} == {S.InProgress}


def test_the_text_of_the_nul_escape_itself_is_no_nul(store: JobStore) -> None:
    job = job_in(store, S.InProgress)
    done = store.complete(job.id, job.lease_token, {"s": "\\u0000", "k\\u0000": 1})
    assert done.result == {"s": "\\u0000", "k\\u0000": 1}


def test_nul_in_an_error_is_replaced_and_the_failure_recorded(store: JobStore) -> None:
    job = job_in(store, S.InProgress)
    error = {"type": "Bad\x00Error", "message": "x\x00y", "traceback": "line\x00"}
    failed = store.fail(job.id, job.lease_token, error, permanent=True)
    assert failed.status is S.Failed
    assert failed.error == {"type": f"Bad{R}Error", "message": f"x{R}y", "traceback": f"line{R}"}
    assert store.get(job.id).error == failed.error
    [attempt] = store.attempts(job.id)
    assert attempt.error == failed.error
    assert store.events(job.id)[-1].message == f"Bad{R}Error: x{R}y"


def test_nul_in_a_retried_error_is_replaced(store: JobStore) -> None:
    job = job_in(store, S.InProgress, max_retries=2)
    retried = store.fail(job.id, job.lease_token, {"type": "E", "message": "\x00", "traceback": None})
    assert retried.status is S.Scheduled and retried.error is not None
    assert retried.error["message"] == R


def test_an_error_that_is_not_json_is_refused_on_every_store(store: JobStore) -> None:
    job = job_in(store, S.InProgress)
    with pytest.raises(ValidationError) as raised:
        store.fail(job.id, job.lease_token, {"type": "E", "message": object(), "traceback": None})
    assert raised.value.field == "error"
    assert store.get(job.id).status is S.InProgress


@pytest.mark.parametrize("option", ["idempotency_key", "unique_key", "limit_key"])
def test_nul_in_an_enqueue_key_is_refused_naming_it(store: JobStore, option: str) -> None:
    with pytest.raises(ValidationError) as raised:
        store.enqueue("t", None, **{option: "k\x00"})
    assert raised.value.field == option
    assert store.counts().by_status.get("Queued", 0) == 0


@pytest.mark.parametrize("criterion", ["id_part", "error", "payload"])
def test_search_criteria_with_a_nul_are_refused(store: JobStore, criterion: str) -> None:
    value = "k=x\x00y" if criterion == "payload" else "x\x00y"
    with pytest.raises(ValidationError) as raised:
        store.search_jobs(**{criterion: value})  # type: ignore[arg-type]
    assert raised.value.field == criterion


def test_a_listing_filter_with_a_nul_is_no_outage(store: JobStore) -> None:
    store.enqueue("t")
    for filters in ({"queue": "a\x00b"}, {"name": "t\x00"}):
        try:
            page = store.list_jobs(**filters)  # type: ignore[arg-type]
        except ValidationError:
            continue
        assert page.items == []


def test_payload_keys_with_quotes_and_dots_match_on_every_store(store: JobStore) -> None:
    wanted = store.enqueue("t", {'a"b': 1, "c.d": "x", "e'f": True, "g\\h": None})
    store.enqueue("t", {"ab": 1, "c": {"d": "x"}})
    for key, value in (('a"b', 1), ("c.d", "x"), ("e'f", True), ("g\\h", None)):
        page = store.search_jobs(payload=(key, value))
        assert [j.id for j in page.items] == [wanted.id], key


# ------------------------------------------------ database errors, by class
@pytest.fixture
def pg_store(handle: StoreHandle) -> JobStore:
    if handle.backend != "postgresql":
        pytest.skip("PostgreSQL's own error classes")
    return handle.store


def _read(store: JobStore, sql: str) -> object:
    return store.read(text(sql))  # type: ignore[attr-defined]


def test_a_data_exception_is_a_validation_error_not_an_outage(pg_store: JobStore) -> None:
    for sql in ("SELECT 1 / 0", "SELECT 'x'::int", "SELECT '\\u0000'::jsonb"):
        with pytest.raises(ValidationError) as raised:
            _read(pg_store, sql)
        assert raised.value.field == "data", sql


def test_a_programming_error_is_raised_as_it_is(pg_store: JobStore) -> None:
    from sqlalchemy.exc import ProgrammingError

    with pytest.raises(ProgrammingError):
        _read(pg_store, "SELECT no_such_column FROM leasehold_jobs")


def test_a_lost_connection_is_still_an_outage(pg_store: JobStore) -> None:
    with pytest.raises(StoreUnavailable):
        _read(pg_store, "SELECT pg_terminate_backend(pg_backend_pid())")
    assert pg_store.counts().by_status["Queued"] == 0  # the pool recovers
