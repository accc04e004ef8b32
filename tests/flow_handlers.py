"""Handlers of the flow-control process tests
(LEASEHOLD_HANDLERS=tests.handlers,tests.flow_handlers): each appends one
line per start and end to a file the test reads, so overlap and start rates
are measured from the handlers themselves."""

from __future__ import annotations

import os
import time
from collections import Counter

from workers import JobContext, handler


def _note(path: str, what: str, job_id: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{what} {time.time():.6f} {job_id}\n".encode())  # one write: atomic with O_APPEND
    finally:
        os.close(fd)


@handler("flow_sample")
def flow_sample(ctx: JobContext) -> dict[str, object]:
    """Note the start and end of the run in ``payload["log"]``, holding the
    slot ``payload["seconds"]`` in between."""
    _note(ctx.payload["log"], "start", ctx.job_id)
    time.sleep(float(ctx.payload.get("seconds", 0)))
    _note(ctx.payload["log"], "end", ctx.job_id)
    return {"n": ctx.payload.get("n")}


@handler("flow_callback")
def flow_callback(ctx: JobContext) -> dict[str, object]:
    """A batch's callback: the outcomes of its parents by status."""
    counts = Counter(p["status"] for p in ctx.parent_results().values())
    _note(ctx.payload["log"], "callback", ctx.job_id)
    return {"counts": dict(counts)}
