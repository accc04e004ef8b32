"""One poisoned ack (a NUL in a result or in a progress report) costs its own
job at most, never the acks of its batch, on every store: the recorder's batch
is refused before anything is written (ValidationError) and it acks one by
one; the poisoned result fails its job for good with the reason."""

from __future__ import annotations

from typing import Any

from store.base import JobStore
from store.lifecycle import JobStatus
from store.spec import NUL_REPLACEMENT
from workers.handlers import JobContext
from workers.inflight import Running
from workers.progress import ProgressReporter
from workers.recorder import Recorder

S = JobStatus
WORKER = "w-recorder"


def _claim(store: JobStore, n: int) -> list[Running]:
    store.enqueue_many([("t", {"n": i}) for i in range(n)])
    jobs = sorted(store.claim(WORKER, ["default"], n, lease_ttl_s=60), key=lambda j: j.payload["n"])
    assert len(jobs) == n
    return [Running(job, JobContext.for_job(job, WORKER)) for job in jobs]


def _ack_all(store: JobStore, runs: list[Running], results: list[Any], progress: ProgressReporter) -> None:
    """Record every run in one batch (one call)."""
    Recorder(store, WORKER, progress=progress).record(list(zip(runs, results, strict=True)))
    progress.close()


def test_a_nul_in_one_progress_report_loses_no_ack(store: JobStore) -> None:
    runs = _claim(store, 4)
    progress = ProgressReporter(store)
    for i, run in enumerate(runs):  # report() takes what the handler's ctx checked; this one was not
        progress.report(run.job.id, run.job.lease_token, WORKER, 0.5, "a\x00b" if i == 2 else f"r{i}")
    _ack_all(store, runs, [{"n": i} for i in range(4)], progress)
    jobs = [store.get(run.job.id) for run in runs]
    assert [j.status for j in jobs] == [S.Completed] * 4
    assert [j.result for j in jobs] == [{"n": i} for i in range(4)]
    assert jobs[2].progress is not None and jobs[2].progress["message"] == f"a{NUL_REPLACEMENT}b"


def test_a_nul_in_one_result_fails_that_job_and_acks_the_rest(store: JobStore) -> None:
    runs = _claim(store, 4)
    results: list[Any] = [{"n": 0}, {"n": "a\x00"}, {"n": 2}, {"n": 3}]
    _ack_all(store, runs, results, ProgressReporter(store))
    jobs = [store.get(run.job.id) for run in runs]
    assert [j.status for j in jobs] == [S.Completed, S.Failed, S.Completed, S.Completed]
    assert [jobs[i].result for i in (0, 2, 3)] == [{"n": 0}, {"n": 2}, {"n": 3}]
    poisoned = jobs[1]
    assert poisoned.error is not None and poisoned.error["type"] == "ResultNotJSON"
    assert "NUL" in poisoned.error["message"] and poisoned.retry_count == 0
