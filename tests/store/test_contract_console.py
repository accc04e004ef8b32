"""Contract: what the console needs at scale — every failed attempt kept with
its own error, a running job's progress fenced by its lease token, and
operator commands left for workers — on every store."""

from __future__ import annotations

import pytest

from store.base import JobStore
from store.counters import HISTORY_WIDTHS
from store.errors import JobNotFound, LeaseLost, ValidationError, WorkerNotFound, WorkerStopping
from store.lifecycle import EventKind, JobStatus
from store.models import MAX_TRACEBACK_CHARS, JobSpec, WorkerInfo
from tests.store.helpers import expire_leases

S = JobStatus


def _error(kind: str, traceback: str | None = None) -> dict[str, object]:
    return {"type": kind, "message": f"{kind} happened", "traceback": traceback}


def test_every_failed_attempt_keeps_its_own_error(store: JobStore) -> None:
    job = store.enqueue("t", max_retries=3)
    [a1] = store.claim("w-1", ["default"], 1)
    store.fail(job.id, a1.lease_token, _error("ValueError", "tb-1"), worker_id="w-1")
    store.clock_offset_s += 3600
    [a2] = store.claim("w-2", ["default"], 1)
    store.fail(job.id, a2.lease_token, _error("KeyError", "x" * (MAX_TRACEBACK_CHARS + 50)), worker_id="w-2")
    store.clock_offset_s += 3600
    [a3] = store.claim("w-3", ["default"], 1)
    expire_leases(store)
    store.recover_expired()
    attempts = store.attempts(job.id)
    assert [(a.attempt, a.token, a.worker_id) for a in attempts] == [
        (1, a1.lease_token, "w-1"),
        (2, a2.lease_token, "w-2"),
        (3, a3.lease_token, "w-3"),
    ]
    assert [a.error["type"] for a in attempts] == ["ValueError", "KeyError", "LeaseExpired"]
    assert attempts[0].error["traceback"] == "tb-1"
    assert len(attempts[1].error["traceback"]) <= MAX_TRACEBACK_CHARS + 1
    assert all(a.started_at and a.finished_at and a.started_at <= a.finished_at for a in attempts)
    assert store.get(job.id).error["type"] == "LeaseExpired"  # the job keeps the last one, as before


def test_a_job_that_never_failed_has_no_attempts(store: JobStore) -> None:
    job = store.enqueue("t")
    [c] = store.claim("w", ["default"], 1)
    store.complete(job.id, c.lease_token, None)
    assert store.attempts(job.id) == []


def test_attempts_go_with_a_deleted_job(store: JobStore) -> None:
    job = store.enqueue("t", max_retries=0)
    [c] = store.claim("w", ["default"], 1)
    store.fail(job.id, c.lease_token, _error("ValueError"))
    store.delete(job.id, actor="operator:ann")
    assert store.attempts(job.id) == []


def test_progress_is_fenced_by_the_lease_token(store: JobStore) -> None:
    job = store.enqueue("t")
    [c] = store.claim("w-1", ["default"], 1)
    assert store.get(job.id).progress is None
    store.clock_offset_s += 1000  # "at" is the store's clock, offset included
    before = store.now()
    store.report_progress(job.id, c.lease_token, 0.25, "a quarter", worker_id="w-1")
    got = store.get(job.id)
    assert (got.progress["fraction"], got.progress["message"]) == (0.25, "a quarter")
    assert before - 0.01 <= got.progress["at"] <= store.now() + 0.01
    assert got.to_json()["progress"]["fraction"] == 0.25
    store.cancel(job.id, actor="operator:ann")
    with pytest.raises(LeaseLost):
        store.report_progress(job.id, c.lease_token, 0.5, worker_id="w-1")
    assert store.get(job.id).progress["fraction"] == 0.25
    assert store.events(job.id)[-1].kind == EventKind.PROGRESS_REFUSED
    with pytest.raises(JobNotFound):
        store.report_progress("00000000-0000-0000-0000-000000000000", 1, 0.5)


def test_a_batch_of_progress_reports_is_fenced_report_by_report(store: JobStore) -> None:
    jobs = store.enqueue_many([JobSpec("t") for _ in range(4)])
    claimed = {c.id: c for c in store.claim("w-1", ["default"], 4)}
    fresh, stale, canceled, gone = (claimed[j.id] for j in jobs)
    store.cancel(canceled.id, actor="operator:ann")
    store.clock_offset_s += 1000  # "at" is the store's clock, offset included
    before = store.now()
    unknown = "00000000-0000-0000-0000-000000000000"
    reports = [
        (fresh.id, fresh.lease_token, 0.25, "a quarter"),
        (stale.id, stale.lease_token - 1, 0.5, "stale token"),
        (canceled.id, canceled.lease_token, 0.5, None),
        (unknown, 1, 0.5, None),
        (fresh.id, fresh.lease_token, 0.75, "three quarters"),  # the same run again: the last wins
        (stale.id, stale.lease_token, 0.1, None),
    ]
    answers = store.report_progress_many(reports, worker_id="w-1")
    assert answers[0] is None and answers[4] is None and answers[5] is None
    refused = [(a.job_id, a.token, a.current_token, a.status) for a in answers[1:4]]
    assert refused == [
        (stale.id, stale.lease_token - 1, stale.lease_token, "InProgress"),
        (canceled.id, canceled.lease_token, canceled.lease_token, "Canceled"),
        (unknown, 1, None, None),
    ]
    got = store.get(fresh.id).progress
    assert (got["fraction"], got["message"]) == (0.75, "three quarters")
    assert before - 0.01 <= got["at"] <= store.now() + 0.01
    assert store.get(stale.id).progress["fraction"] == 0.1  # its current token's report stored
    assert store.get(canceled.id).progress is None
    for job_id in (stale.id, canceled.id):
        [event] = [e for e in store.events(job_id) if e.kind == EventKind.PROGRESS_REFUSED]
        assert (event.actor, event.token) == ("w-1", reports[[r[0] for r in reports].index(job_id)][1])
    assert not [e for e in store.events(fresh.id) if e.kind == EventKind.PROGRESS_REFUSED]
    assert store.report_progress_many([]) == []
    untouched = store.get(gone.id)
    assert untouched.progress is None and untouched.status == S.InProgress


def test_a_batch_with_a_bad_report_writes_nothing(store: JobStore) -> None:
    job = store.enqueue("t")
    [c] = store.claim("w-1", ["default"], 1)
    with pytest.raises(ValidationError):
        store.report_progress_many([(job.id, c.lease_token, 0.5, None), (job.id, c.lease_token, 2.0, None)])
    assert store.get(job.id).progress is None


@pytest.mark.parametrize(("fraction", "message"), [(1.5, None), (-0.1, None), (0.5, "m" * 501)])
def test_bad_progress_is_refused(store: JobStore, fraction: float, message: str | None) -> None:
    job = store.enqueue("t")
    [c] = store.claim("w-1", ["default"], 1)
    with pytest.raises(ValidationError):
        store.report_progress(job.id, c.lease_token, fraction, message)


def test_a_command_waits_for_the_workers_next_heartbeat(store: JobStore) -> None:
    info = WorkerInfo("w-1", "host", 1, ["default"], 2, [], None, None)
    assert store.worker_heartbeat(info) is None
    after = store.command_worker("w-1", "quiet", actor="operator:ann")
    assert (after.command, after.command_by) == ("quiet", "operator:ann")
    assert store.worker_heartbeat(info) == "quiet"
    assert store.worker_heartbeat(info) == "quiet"  # it stays: the page shows the worker quiet
    store.command_worker("w-1", "stop", actor="operator:bob")
    assert store.worker_heartbeat(info) == "stop"
    assert [(w.id, w.command) for w in store.workers()] == [("w-1", "stop")]
    with pytest.raises(WorkerNotFound):
        store.command_worker("nope", "quiet")
    with pytest.raises(ValidationError):
        store.command_worker("w-1", "explode")


def test_unquiet_takes_a_quiet_back_but_never_a_stop(store: JobStore) -> None:
    info = WorkerInfo("w-1", "host", 1, ["default"], 2, [], None, None)
    store.worker_heartbeat(info)
    store.command_worker("w-1", "quiet", actor="operator:ann")
    after = store.command_worker("w-1", "unquiet", actor="operator:bob")
    assert (after.id, after.command, after.command_by) == ("w-1", None, None)
    assert store.worker_heartbeat(info) is None
    assert store.command_worker("w-1", "unquiet").command is None  # not quiet: nothing changes
    store.command_worker("w-1", "stop", actor="operator:ann")
    with pytest.raises(WorkerStopping):
        store.command_worker("w-1", "unquiet", actor="operator:bob")
    assert [(w.command, w.command_by) for w in store.workers()] == [("stop", "operator:ann")]
    assert store.worker_heartbeat(info) == "stop"
    with pytest.raises(WorkerNotFound):
        store.command_worker("nope", "unquiet")
    kinds = [(e.actor, e.message) for e in store.audit(10) if e.kind == EventKind.WORKER_COMMANDED]
    assert ("operator:bob", "unquiet worker w-1") in kinds


@pytest.mark.parametrize("command", ["quiet", "stop"])
def test_a_new_process_under_the_same_name_does_not_inherit_a_command(store: JobStore, command: str) -> None:
    old = WorkerInfo("w-1", "host", 100, ["default"], 2, [], None, None)
    store.worker_heartbeat(old, register=True)
    store.command_worker("w-1", command, actor="operator:ann")
    assert store.worker_heartbeat(old) == command  # the process it was sent to keeps it
    new = WorkerInfo("w-1", "host", 200, ["default"], 2, [], None, None)
    assert store.worker_heartbeat(new, register=True) is None
    assert store.worker_heartbeat(new) is None
    [entry] = store.workers()
    assert (entry.pid, entry.command, entry.command_by) == (200, None, None)
    store.command_worker("w-1", "quiet", actor="operator:bob")  # a command sent to the new process
    assert store.worker_heartbeat(new) == "quiet"
    assert store.worker_heartbeat(WorkerInfo("w-2", "h", 1, ["q"], 1), register=True) is None  # a first one


def test_worker_commands_are_audited(store: JobStore) -> None:
    store.worker_heartbeat(WorkerInfo("w-1", "host", 1, ["default"], 2, [], None, None))
    store.command_worker("w-1", "quiet", actor="operator:ann")
    store.command_worker("w-1", "stop", actor="operator:bob")
    with pytest.raises(WorkerNotFound):
        store.command_worker("nope", "stop", actor="operator:ann")
    entries = [(e.kind, e.actor, e.message) for e in store.audit(10)]
    assert entries == [
        (EventKind.WORKER_COMMANDED, "operator:bob", "stop worker w-1"),
        (EventKind.WORKER_COMMANDED, "operator:ann", "quiet worker w-1"),
    ]


def test_history_counts_a_known_workload_per_queue_and_bucket(store: JobStore) -> None:
    now = store.now()
    for _ in range(3):
        store.enqueue("t", None, queue="mail", max_retries=1)
    store.enqueue("t", None, queue="other")
    jobs = store.claim("w", ["mail"], 3)
    store.complete(jobs[0].id, jobs[0].lease_token, None)
    store.complete(jobs[1].id, jobs[1].lease_token, None)
    store.fail(jobs[2].id, jobs[2].lease_token, _error("ValueError"))  # retry scheduled
    store.clock_offset_s += 3600
    assert len(store.claim("w", ["mail"], 1)) == 1
    expire_leases(store)
    store.recover_expired()  # lease expired, retries spent: Failed
    for width in (60, 3600):
        mail = store.history(width, now - width, queue="mail")
        totals = {kind: sum(b.values()) for kind, b in mail.items()}
        assert totals == {"enqueued": 3, "completed": 2, "retry_scheduled": 1, "lease_expired": 1}
        every = store.history(width, now - width)
        assert sum(every["enqueued"].values()) == 4
        buckets = {bucket for b in every.values() for bucket in b}
        assert all(bucket % width == 0 and now - width < bucket <= store.now() for bucket in buckets)
    with pytest.raises(ValidationError):
        store.history(15, now)


def test_queue_event_totals_count_the_history_kinds_and_outlive_the_buckets(store: JobStore) -> None:
    for _ in range(3):
        store.enqueue("t", None, queue="mail", max_retries=1)
    store.enqueue_many([JobSpec("t", None, queue="other"), JobSpec("t", None, queue="other")])
    jobs = store.claim("w", ["mail"], 3)
    store.complete_many([(jobs[0].id, jobs[0].lease_token, None)], "w", return_jobs=False)
    store.fail(jobs[1].id, jobs[1].lease_token, _error("ValueError"))  # retry scheduled
    store.fail(jobs[2].id, jobs[2].lease_token, _error("ValueError"), permanent=True)
    assert len(store.claim("w", ["other"], 1)) == 1
    expire_leases(store)
    store.recover_expired()  # a retry left: rescheduled, counted as a lease expiry
    expected = {
        ("mail", "enqueued"): 3,
        ("mail", "completed"): 1,
        ("mail", "retry_scheduled"): 1,
        ("mail", "failed"): 1,
        ("other", "enqueued"): 2,
        ("other", "lease_expired"): 1,
    }
    assert store.queue_event_counts() == expected
    store.clock_offset_s += 40 * 86400
    store.trim_history()
    assert store.queue_event_counts() == expected


def test_history_keeps_minutes_48_hours_and_hours_30_days(store: JobStore) -> None:
    now = store.now()
    store.enqueue("t")
    store.clock_offset_s += 3 * 86400
    store.trim_history()
    assert store.history(60, now - 60) == {}
    assert sum(store.history(3600, now - 3600)["enqueued"].values()) == 1
    store.clock_offset_s += 31 * 86400
    store.trim_history()
    assert store.history(3600, now - 3600) == {}


def test_history_reads_the_same_before_and_after_a_trim_rolls_it_up(store: JobStore) -> None:
    """Wide buckets are kept however the store likes (the Redis store rolls
    minutes up into hours at trim time and sums the rest at read time): a
    trim never changes what any width reads, and counts nothing twice."""
    since = store.now() - 7200
    store.enqueue("t", queue="a")
    store.enqueue("t", queue="b")
    store.clock_offset_s += 3600
    store.enqueue("t", queue="a")

    def read() -> dict:
        return {(w, q): store.history(w, since, queue=q) for w in HISTORY_WIDTHS for q in (None, "a")}

    before = read()
    assert sum(before[(3600, None)]["enqueued"].values()) == 3
    store.trim_history()
    assert read() == before
    store.enqueue("t", queue="a")  # after the roll-up: still counted once
    store.trim_history()
    store.trim_history()
    for width in HISTORY_WIDTHS:
        assert sum(store.history(width, since, queue="a")["enqueued"].values()) == 3
    assert store.event_counts()["enqueued"] == 4
    assert store.queue_event_counts()[("a", "enqueued")] == 3


def test_failures_count_in_a_fixed_window_shared_by_every_handle(handle) -> None:
    store, other = handle.store, handle.open()
    assert store.failure_count("login:ann|1.2.3.4") == (0, 0.0)
    assert [store.record_failure("login:ann|1.2.3.4", 60) for _ in range(3)] == [1, 2, 3]
    other.clock_offset_s = store.clock_offset_s
    assert other.record_failure("login:ann|1.2.3.4", 60) == 4  # another process sees the same count
    n, left = other.failure_count("login:ann|1.2.3.4")
    assert n == 4 and 0 < left <= 60
    assert store.failure_count("login:ann|5.6.7.8") == (0, 0.0)
    store.clock_offset_s += 61
    assert store.failure_count("login:ann|1.2.3.4") == (0, 0.0)
    assert store.record_failure("login:ann|1.2.3.4", 60) == 1  # a new window
    store.clear_failures("login:ann|1.2.3.4")
    assert store.failure_count("login:ann|1.2.3.4") == (0, 0.0)
    with pytest.raises(ValidationError):
        store.record_failure("k", 0)
