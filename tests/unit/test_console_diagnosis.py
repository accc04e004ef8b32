""" "Why isn't it running?" never contradicts itself: a job a pause or a limit
holds is not also said to be claimed at the next poll; liveness has an overdue
step between alive and silent."""

from __future__ import annotations

from dataclasses import replace

from store.lifecycle import JobStatus
from store.models import QueueState
from tests.unit.test_console_logic import NOW, at, ctx, job, texts, worker
from webapp.console.diagnosis import explain, is_alive, is_overdue

S = JobStatus


def test_a_job_held_by_a_limit_is_not_also_about_to_be_claimed() -> None:
    held = replace(ctx(worker("w", 1)), limit=("concurrency", "concurrency limit 1: 3 running"))
    text = texts(
        explain(replace(job(S.Queued), queue="reports"), replace(held, workers=[worker("w", 1, ["reports"])]))
    )
    assert "Held by a limit of queue 'reports' (concurrency limit 1: 3 running)" in text
    assert "'s " not in text
    assert "free slot" not in text and "waiting to be claimed" not in text
    assert "0 of 2 slots busy" in text  # the worker line stays: it is a fact


def test_a_job_in_a_paused_queue_is_not_waiting_to_be_claimed() -> None:
    paused = replace(ctx(worker("w", 1)), queue_state=QueueState("default", True, "operator:ann", at(-60)))
    for j in (job(S.Queued), job(S.Scheduled, retry_delay_until=at(-1))):
        text = texts(explain(j, paused))
        assert "paused by ann" in text
        assert "waiting to be claimed" not in text and "free slot" not in text


def test_a_free_job_still_says_a_worker_has_a_free_slot() -> None:
    text = texts(explain(job(S.Queued), ctx(worker("w", 1))))
    assert "Queued and due now; waiting to be claimed." in text and "free slot" in text


def test_a_late_heartbeat_is_overdue_before_the_worker_is_silent() -> None:
    fresh, late, gone = worker("a", 2), worker("b", 8), worker("c", 31)  # lease TTL 10 s
    assert [is_alive(w, NOW, 10) for w in (fresh, late, gone)] == [True, True, False]
    assert [is_overdue(w, NOW, 10) for w in (fresh, late, gone)] == [False, True, True]
