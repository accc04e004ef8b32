"""``GET /api/handlers/<name>/metrics``: a handler's succeeded, failed and
retried runs and run-time percentiles per chart bucket over a window
(store/handler_metrics.py reads the store's minute buckets)."""

from __future__ import annotations

from typing import Any

from store import handler_metrics
from store.errors import ValidationError
from store.spec import MAX_NAME_LEN
from webapp.api.common import context_of
from webapp.api.schemas_operating import HandlerMetricsQuery
from webapp.api.state import job_store


def handler_metrics_view(name: str) -> dict[str, Any]:
    """A handler's metrics over `window` (1h: 60 one-minute buckets; 24h: 96
    of 15 minutes; 7d: 168 of an hour), oldest first, every bucket listed:
    `succeeded`, `failed` (ended Failed) and `retried` (a retry scheduled)
    counted exactly, `run_time_ms` p50/p95/p99 from a log-bucketed sketch
    (within 2 %; null without runs). A handler with no runs in the window
    (one never seen too) answers zero buckets' counts, as the history of an
    idle queue does. 422 naming `window` for another window, `name` for a
    name longer than a job's."""
    if len(name) > MAX_NAME_LEN:
        raise ValidationError("name", f"must be at most {MAX_NAME_LEN} characters")
    q: HandlerMetricsQuery = context_of("query", HandlerMetricsQuery)
    return handler_metrics.metrics(job_store(), name, q.window)
