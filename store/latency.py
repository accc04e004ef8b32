"""Queue latency: how long each queue's oldest waiting job has waited
(Sidekiq's queue latency), read with the store's own listing.

A queue's latency is the store's clock minus the time its oldest Queued job
became Queued (enqueued, requeued or retried now: its ``last_updated_at``),
0 for a queue with no Queued job. A paused queue's latency grows while it is
paused. One ``list_jobs(status=Queued, queue=q, order="asc", limit=1)`` per
queue holding Queued jobs: an index read on every store (SQL: by status and
update time; Redis: the queue's listing zset of Queued jobs). A Scheduled job whose
delay or backoff has passed is due too but not counted: the listings order
by update time, not due time, and a backlog that delays it also holds
Queued jobs.
"""

from __future__ import annotations

from store.base import JobStore
from store.lifecycle import JobStatus
from store.models import Counts


def queue_latency(store: JobStore, counts: Counts | None = None) -> dict[str, float]:
    """Seconds the oldest Queued job of each queue of ``counts`` (default:
    ``store.counts()``) has waited, by queue name; 0.0 for a queue with none."""
    counts = counts if counts is not None else store.counts()
    now = store.now()
    out: dict[str, float] = {}
    for queue, by_status in sorted(counts.by_queue.items()):
        out[queue] = 0.0
        if by_status.get(JobStatus.Queued.name):
            page = store.list_jobs(status=JobStatus.Queued, queue=queue, order="asc", limit=1)
            if page.items and page.items[0].last_updated_at is not None:
                out[queue] = max(0.0, now - page.items[0].last_updated_at.timestamp())
    return out
