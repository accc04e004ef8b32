"""Waiting over HTTP: ``GET /api/jobs/<id>?wait=S`` answers when the job is
finished or S seconds (0 to MAX_WAIT_S) have passed, whichever is first.

The request's own thread reads the job again every POLL_S (a bounded poll:
at most about one store read a second per waiting request, and no thread or
subscription of its own), so any store and any number of web processes
serve it alike. Still running at the end: the same body, with
``Retry-After: 1`` (ask again, with ``wait`` again)."""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict, Field

from store.base import JobStore
from store.lifecycle import TERMINAL
from store.models import Job

#: Longest wait a request may ask for, seconds.
MAX_WAIT_S = 30.0
#: Seconds between two reads of the job while waiting.
POLL_S = 1.0
#: ``Retry-After`` of an answer whose job is still running, seconds.
RETRY_AFTER_S = 1


class JobQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    wait: float = Field(
        0.0, ge=0.0, le=MAX_WAIT_S, allow_inf_nan=False, description="seconds to wait for the job to finish"
    )


def wait_for(store: JobStore, job_id: str, wait_s: float, poll_s: float = POLL_S) -> Job:
    """The job once it is finished, or as it is after ``wait_s`` seconds;
    read at once, then every ``poll_s``. Raises JobNotFound."""
    deadline = time.monotonic() + wait_s
    job = store.get(job_id)
    while job.status not in TERMINAL and (left := deadline - time.monotonic()) > 0:
        time.sleep(min(poll_s, left))
        job = store.get(job_id)
    return job
