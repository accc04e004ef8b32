"""A handler module whose handler enqueues itself (``tests/workers/test_enqueue_from_code.py``)."""

from __future__ import annotations

from typing import Any

from workers import JobContext, handler


@handler("countdown", queue="chain", max_retries=0, timeout=30)
def countdown(ctx: JobContext) -> dict[str, Any]:
    """Count ``payload["n"]`` down to 0, one job a step, each enqueued by the one before."""
    n = ctx.payload["n"]
    if n > 0:
        countdown.enqueue({"n": n - 1})  # the process's store (workers.use_store)
    return {"n": n, "by": ctx.worker_id}
