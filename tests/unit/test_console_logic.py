"""Pure parts of the console: "why isn't it running?", liveness, login throttling, users."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from store.lifecycle import JobStatus
from store.models import Job, WorkerInfo
from webapp.config import ConfigError
from webapp.console.auth import parse_users
from webapp.console.diagnosis import Context, explain, is_alive, queue_names
from webapp.console.queries import parse_filters

S = JobStatus
NOW = 1_800_000_000.0


def at(seconds_from_now: float) -> datetime:
    return datetime.fromtimestamp(NOW + seconds_from_now, UTC)


def job(status: JobStatus, **fields: object) -> Job:
    return Job(id="j-1", name="t", queue="default", status=status, payload=None, **fields)  # type: ignore[arg-type]


def worker(wid: str, seen_ago: float, queues: list[str] | None = None, busy: int = 0) -> WorkerInfo:
    return WorkerInfo(
        wid, "h", 1, queues or ["default"], 2, [f"x{i}" for i in range(busy)], None, at(-seen_ago)
    )


def ctx(*workers: WorkerInfo, queued: int = 1) -> Context:
    return Context(NOW, list(workers), lease_ttl_s=10, recovery_interval_s=15, queued_in_queue=queued)


def texts(reasons: list) -> str:
    return " | ".join(r.text for r in reasons)


def test_liveness_is_three_lease_ttls() -> None:
    assert is_alive(worker("w", 29), NOW, 10)
    assert not is_alive(worker("w", 31), NOW, 10)
    assert queue_names(worker("w", 0, ["a", "b:3"])) == ["a", "b"]


def test_terminal_jobs_have_no_answer() -> None:
    for status in (S.Completed, S.Failed, S.Canceled):
        assert explain(job(status), ctx()) == []


def test_scheduled_for_later_and_backoff() -> None:
    later = explain(job(S.Scheduled, retry_delay_until=at(60)), ctx())
    assert "Scheduled for later" in texts(later) and later[0].seconds == pytest.approx(60)
    backoff = explain(
        job(
            S.Scheduled,
            retry_delay_until=at(8),
            retry_count=2,
            max_retries=3,
            error={"type": "E", "message": "m"},
        ),
        ctx(),
    )
    assert "Backoff pending after 2 failure(s) (last: E: m); retry 2 of 3" in texts(backoff)


def test_due_scheduled_job_is_waiting_for_a_worker() -> None:
    reasons = explain(job(S.Scheduled, retry_delay_until=at(-1)), ctx())
    assert "Due now" in texts(reasons) and "No live worker at all" in texts(reasons)


def test_queued_job_with_no_live_worker_on_its_queue() -> None:
    assert "No live worker at all" in texts(explain(job(S.Queued), ctx(worker("old", 100))))
    other = texts(explain(job(S.Queued), ctx(worker("w", 1, ["mail"]))))
    assert "No live worker serves queue 'default' (1 live worker(s) serve: mail)" in other


def test_queued_behind_others_with_busy_workers() -> None:
    reasons = explain(job(S.Queued), ctx(worker("w", 1, busy=2), queued=5))
    assert "0 of 2" not in texts(reasons) and "2 of 2 slots busy" in texts(reasons)
    assert "Queued behind up to 4 other job(s)" in texts(reasons)
    assert reasons[-1].tone == "warn"
    free = explain(job(S.Queued), ctx(worker("w", 1), queued=1))
    assert "free slot" in texts(free)


def test_lease_of_a_silent_worker_and_an_expired_lease() -> None:
    silent = explain(job(S.InProgress, worker_id="w-9", lease_expires_at=at(12)), ctx(worker("w-9", 100)))
    assert "Lease held by worker w-9, which stopped heartbeating (last seen 100 s ago)" in texts(silent)
    assert silent[0].seconds == pytest.approx(12) and silent[0].tone == "bad"
    expired = explain(job(S.InProgress, worker_id="w-9", lease_expires_at=at(-5)), ctx())
    assert "expired 5 s ago; the job awaits recovery (runs every 15 s" in texts(expired)
    running = explain(
        job(S.InProgress, worker_id="w-1", lease_expires_at=at(9), last_heartbeat_at=at(-1)),
        ctx(worker("w-1", 1)),
    )
    assert "Running on w-1; lease renewed 1 s ago; the lease expires in" in texts(running)


def test_users_split_at_first_and_last_colon() -> None:
    users = parse_users("ann:scrypt:32768:8:1$salt$abc:operator, vic:pbkdf2:sha256:1000$s$h:viewer")
    assert users["ann"].password_hash == "scrypt:32768:8:1$salt$abc" and users["ann"].is_operator
    assert users["vic"].role == "viewer" and not users["vic"].is_operator
    assert parse_users("") == {}
    with pytest.raises(ConfigError, match="LEASEHOLD_USERS entry 1"):
        parse_users(":hash:viewer")


def test_filters_from_the_query_string() -> None:
    filters, problems = parse_filters(
        {"status": "in_progress", "queue": " q ", "id": "ABC-1", "sort": "oldest"}
    )
    assert problems == [] and filters.status is S.InProgress and filters.queue == "q"
    assert filters.id_part == "abc-1" and filters.oldest_first
    assert filters.as_query() == {"status": "InProgress", "queue": "q", "id": "abc-1", "sort": "oldest"}
    _, problems = parse_filters({"status": "nope", "id": "zz'"})
    assert len(problems) == 2


def test_queued_job_whose_handler_no_live_worker_serves() -> None:
    publishing = worker("w", 1)
    publishing.handlers = [{"name": "other", "queue": "default"}]
    assert "No live worker serves handler 't'" in texts(explain(job(S.Queued), ctx(publishing)))
    publishing.handlers = [{"name": "t", "queue": "default"}]
    assert "No live worker serves handler" not in texts(explain(job(S.Queued), ctx(publishing)))
    assert "No live worker serves handler" not in texts(explain(job(S.Queued), ctx(worker("w", 1))))
