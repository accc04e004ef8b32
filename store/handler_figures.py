"""Per-handler figures for the Handlers page and ``GET /api/handlers``: jobs
waiting, read with the store's own listing (at most SAMPLE: a handler with
more shows a lower bound, ``capped``), and over the last hour runs completed
and failed and run time p50/p95, from the handler's minute buckets
(store/handler_metrics.py: exact counts, percentiles within its relative
accuracy). Failures are handler failures that ended the job Failed (retries
spent or permanent).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from store import handler_metrics as hm
from store.base import MAX_PAGE_SIZE, JobStore
from store.lifecycle import JobStatus

#: Jobs read per status and handler at most.
SAMPLE = MAX_PAGE_SIZE
#: The window of the completed and failed figures, seconds.
WINDOW_S = 3600.0


@dataclass(frozen=True, slots=True)
class HandlerFigures:
    """``waiting``: Queued jobs; ``completed``/``failed``: jobs that ended so
    in the last WINDOW_S; ``run_p50_s``/``run_p95_s``: run time of the runs
    that ended then, seconds (None without any); ``capped``: waiting hit SAMPLE."""

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


def figures(store: JobStore, name: str, now_s: float) -> HandlerFigures:
    """The figures of handler ``name`` at the store time ``now_s`` (a listing
    read and a read of its minute buckets)."""
    minutes = store.handler_minutes(name, now_s - WINDOW_S)
    merged: Counter[str] = Counter()
    for fields in minutes.values():
        merged.update(fields)
    counts, bins = hm.tally(merged)
    p50, p95 = hm.percentile(bins, 0.5), hm.percentile(bins, 0.95)
    waiting = store.list_jobs(status=JobStatus.Queued, name=name, limit=SAMPLE).items
    return HandlerFigures(
        waiting=len(waiting),
        completed=counts.get(hm.SUCCEEDED, 0),
        failed=counts.get(hm.FAILED, 0),
        run_p50_s=None if p50 is None else p50 / 1000.0,
        run_p95_s=None if p95 is None else p95 / 1000.0,
        capped=len(waiting) == SAMPLE,
    )
