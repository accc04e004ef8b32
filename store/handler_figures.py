"""Per-handler figures for the Handlers page and ``GET /api/handlers``: jobs
waiting, and over the last hour jobs completed and failed and run time
p50/p95, read with the store's own listing (newest first, by name).

Each figure reads at most SAMPLE jobs (one listing page per status): a
handler with more in a window shows the count as a lower bound
(``capped``). Run time is ``completed_at - started_at`` of the last
attempt; failures are jobs that ended Failed (retries spent or permanent).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from store.base import MAX_PAGE_SIZE, JobStore
from store.lifecycle import JobStatus
from store.models import Job

#: Jobs read per status and handler at most.
SAMPLE = MAX_PAGE_SIZE
#: The window of the completed and failed figures, seconds.
WINDOW_S = 3600.0


@dataclass(frozen=True, slots=True)
class HandlerFigures:
    """``waiting``: Queued jobs; ``completed``/``failed``: jobs that ended so
    in the last WINDOW_S; ``run_p50_s``/``run_p95_s``: run time of those
    completed (None without any); ``capped``: some count hit SAMPLE."""

    waiting: int
    completed: int
    failed: int
    run_p50_s: float | None
    run_p95_s: float | None
    capped: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "waiting": self.waiting,
            "completed_last_hour": self.completed,
            "failed_last_hour": self.failed,
            "run_p50_s": self.run_p50_s,
            "run_p95_s": self.run_p95_s,
            "capped": self.capped,
        }


def _percentile(ordered: list[float], p: int) -> float:
    """Nearest rank of sorted values (100: the largest)."""
    return ordered[max(1, -(-p * len(ordered) // 100)) - 1]


def _recent(store: JobStore, name: str, status: JobStatus, since: float) -> tuple[list[Job], bool]:
    page = store.list_jobs(status=status, name=name, limit=SAMPLE)
    jobs = [j for j in page.items if j.completed_at is not None and j.completed_at.timestamp() >= since]
    return jobs, len(page.items) == SAMPLE and len(jobs) == SAMPLE


def figures(store: JobStore, name: str, now_s: float) -> HandlerFigures:
    """The figures of handler ``name`` at the store time ``now_s`` (three listing reads)."""
    since = now_s - WINDOW_S
    done, capped_done = _recent(store, name, JobStatus.Completed, since)
    failed, capped_failed = _recent(store, name, JobStatus.Failed, since)
    waiting = store.list_jobs(status=JobStatus.Queued, name=name, limit=SAMPLE).items
    runs = sorted(
        (j.completed_at - j.started_at).total_seconds() for j in done if j.completed_at and j.started_at
    )
    return HandlerFigures(
        waiting=len(waiting),
        completed=len(done),
        failed=len(failed),
        run_p50_s=_percentile(runs, 50) if runs else None,
        run_p95_s=_percentile(runs, 95) if runs else None,
        capped=capped_done or capped_failed or len(waiting) == SAMPLE,
    )
