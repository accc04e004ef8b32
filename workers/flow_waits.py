"""What a worker does for flow control: reads a waiting job's parents'
outcomes before its run, and waits no longer than a rate limit asks after an
empty claim (the store says when its window reopens)."""

from __future__ import annotations

from typing import Any

from store.base import JobStore


def parent_results(store: JobStore, job_id: str) -> dict[str, dict[str, Any]]:
    """``{parent_id: {"status": name, "result": value}}`` of a job's parents."""
    return {p.id: {"status": p.status.name, "result": p.result} for p in store.parents(job_id)}


def idle_wait(store: JobStore, worker_id: str, backoff_s: float) -> float:
    """Seconds to wait after an empty claim: the idle backoff, or less when a
    rate limit held jobs and its window reopens sooner (a few ms late, so the
    next claim finds it open rather than spinning on it)."""
    retry = store.claim_retry_after(worker_id)
    if retry is None:
        return backoff_s
    return min(backoff_s, retry + 0.002)
