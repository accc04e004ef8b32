"""The pure lifecycle: every (from, to) pair, operation guards, backoff numbers."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.errors import InvalidTransition
from store.lifecycle import (
    OPERATIONS,
    JobStatus,
    Operation,
    RetryPolicy,
    check_operation,
    check_transition,
    decide_failure,
    is_legal,
)

S = JobStatus

# The legal transitions, written out as the README's lifecycle diagram draws them.
SPEC = {
    (S.Queued, S.InProgress),
    (S.Queued, S.Scheduled),
    (S.Queued, S.Completed),
    (S.Queued, S.Failed),
    (S.Queued, S.Canceled),
    (S.Scheduled, S.Queued),
    (S.Scheduled, S.InProgress),
    (S.Scheduled, S.Canceled),
    (S.InProgress, S.Completed),
    (S.InProgress, S.Failed),
    (S.InProgress, S.Scheduled),
    (S.InProgress, S.Canceled),
    (S.Failed, S.Queued),
    (S.Failed, S.Scheduled),
    (S.Failed, S.Canceled),
    (S.Completed, S.Canceled),
    (S.Canceled, S.Queued),
}


def test_wire_codes() -> None:
    assert [(s.name, int(s)) for s in S] == [
        ("Queued", 100),
        ("Scheduled", 200),
        ("InProgress", 300),
        ("Completed", 400),
        ("Failed", 500),
        ("Canceled", 600),
    ]


@pytest.mark.parametrize(("source", "target"), list(itertools.product(S, S)))
def test_every_pair(source: JobStatus, target: JobStatus) -> None:
    legal = (source, target) in SPEC
    assert is_legal(source, target) is legal
    if legal:
        check_transition("j", source, target)
    else:
        with pytest.raises(InvalidTransition) as err:
            check_transition("j", source, target)
        assert err.value.source == source.name
        assert err.value.target == target.name


@pytest.mark.parametrize(("op", "current"), list(itertools.product(Operation, S)))
def test_operation_guards(op: Operation, current: JobStatus) -> None:
    rule = OPERATIONS[op]
    if current in rule.sources:
        check_operation("j", op, current)
        assert all((current, t) in SPEC for t in rule.targets)
    else:
        with pytest.raises(InvalidTransition):
            check_operation("j", op, current)


def test_operator_actions_start_where_the_console_offers_them() -> None:
    assert OPERATIONS[Operation.CANCEL].sources == {
        S.Queued,
        S.Scheduled,
        S.InProgress,
        S.Failed,
        S.Completed,
    }
    assert OPERATIONS[Operation.REQUEUE].sources == {S.Scheduled, S.Failed, S.Canceled}
    assert OPERATIONS[Operation.RETRY_NOW].sources == {S.Scheduled, S.Failed}
    assert OPERATIONS[Operation.CLAIM].sources == {S.Queued, S.Scheduled}


def test_parse() -> None:
    assert S.parse("InProgress") is S.InProgress
    assert S.parse("in_progress") is S.InProgress
    assert S.parse("300") is S.InProgress
    assert S.parse(600) is S.Canceled
    with pytest.raises(ValueError, match="Queued"):
        S.parse("Running")
    with pytest.raises(ValueError):
        S.parse(301)


def test_backoff_numbers() -> None:
    policy = RetryPolicy(base_s=2.0, max_delay_s=3600.0)
    assert [policy.delay_s(n) for n in range(1, 6)] == [4.0, 8.0, 16.0, 32.0, 64.0]
    assert policy.delay_s(11) == 3600.0  # 2 * 2**11 = 4096, capped
    assert policy.delay_s(10_000) == 3600.0  # no overflow
    assert RetryPolicy(base_s=0.5, max_delay_s=10).delay_s(3) == 4.0


def test_jitter_stays_within_bounds() -> None:
    policy = RetryPolicy(base_s=1.0, max_delay_s=100.0, jitter=0.5)
    rng = random.Random(7)
    draws = [policy.delay_s(3, rng) for _ in range(500)]
    assert all(4.0 <= d <= 8.0 for d in draws)
    assert max(draws) - min(draws) > 2.0  # really spread


@pytest.mark.parametrize(("value", "kwargs"), [(-1, "base_s"), (-1, "max_delay_s"), (1.5, "jitter")])
def test_policy_rejects_bad_values(value: float, kwargs: str) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**{kwargs: value})


def test_decide_failure_schedules_then_fails() -> None:
    policy = RetryPolicy(base_s=2.0)
    first = decide_failure(0, 3, policy)
    assert (first.status, first.retry_count, first.delay_s) == (S.Scheduled, 1, 4.0)
    third = decide_failure(2, 3, policy)
    assert (third.status, third.retry_count, third.delay_s) == (S.Scheduled, 3, 16.0)
    spent = decide_failure(3, 3, policy)
    assert (spent.status, spent.retry_count, spent.delay_s) == (S.Failed, 3, None)
    none_allowed = decide_failure(0, 0, policy)
    assert none_allowed.status is S.Failed


def test_permanent_error_skips_retries() -> None:
    decision = decide_failure(0, 5, RetryPolicy(), permanent=True)
    assert (decision.status, decision.retry_count, decision.delay_s) == (S.Failed, 0, None)


@given(st.integers(0, 20), st.integers(0, 20))
def test_retry_count_never_exceeds_max(max_retries: int, failures: int) -> None:
    count, status = 0, S.Queued
    attempts = 0
    for _ in range(failures):
        if status is S.Failed:
            break
        attempts += 1
        decision = decide_failure(count, max_retries, RetryPolicy())
        count, status = decision.retry_count, decision.status
        assert count <= max_retries
    if failures > max_retries:
        assert status is S.Failed
        assert attempts == max_retries + 1  # max_retries=3: 4 attempts


def test_run_again_decisions() -> None:
    from store.lifecycle import RunAgain

    policy = RetryPolicy(base_s=2.0)
    retry = decide_failure(0, 3, policy, again=RunAgain(30.0))
    assert (retry.status, retry.retry_count, retry.delay_s) == (JobStatus.Scheduled, 1, 30.0)
    assert decide_failure(3, 3, policy, again=RunAgain(30.0)).status is JobStatus.Failed
    snooze = RunAgain(5.0, snooze=True, max_snoozes=2)
    kept = decide_failure(3, 3, policy, again=snooze, snoozes=1)
    assert (kept.status, kept.retry_count, kept.delay_s) == (JobStatus.Scheduled, 3, 5.0)
    assert decide_failure(0, 3, policy, again=snooze, snoozes=2).status is JobStatus.Failed


def test_a_handlers_policy_overrides_the_default_value_by_value() -> None:
    default = RetryPolicy(base_s=2.0, max_delay_s=3600.0, jitter=0.2)
    assert default.overridden() is default
    assert default.overridden(base_s=30) == RetryPolicy(30.0, 3600.0, 0.2)
    assert default.overridden(max_delay_s=5, jitter=0) == RetryPolicy(2.0, 5.0, 0.0)
    with pytest.raises(ValueError, match="jitter"):
        default.overridden(jitter=2)
