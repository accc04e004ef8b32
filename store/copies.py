"""Copies of template jobs, the rows the fixture loader writes
(store/fixtures.py; the engines' halves store/sql/fixtures.py and
store/redis/fixtures.py read them): which fields of a copy are its own, and
one row of plain values per copy.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from store.lifecycle import JobStatus
from store.models import Job

#: A copy's time fields, each set when its template has it: to the copy's
#: ``at``, to its due time, to its lease expiry.
AT_FIELDS = ("created_at", "started_at", "last_heartbeat_at", "completed_at", "last_updated_at")
DUE_FIELDS = ("due_at", "retry_delay_until")
LEASE_FIELDS = ("lease_expires_at",)


@dataclass(frozen=True, slots=True)
class Copy:
    """One job to load: a copy of the template of ``status``.

    ``at``: epoch seconds, every time stamp of the copy (created, started,
    heartbeat, completed, last updated); ``due_at``: when a Queued or
    Scheduled copy is due (None: ``at``); ``payload``: JSON value (None: the
    template's); ``message``: the error message of a copy whose template has an
    error (None: the template's); ``id``: the copy's id (None: a new UUID)."""

    status: JobStatus
    queue: str
    name: str
    at: float
    payload: Any = None
    message: str | None = None
    due_at: float | None = None
    id: str | None = None


def copy_rows(templates: Mapping[JobStatus, Job], copies: Iterable[Copy]) -> Iterator[dict[str, Any]]:
    """Each copy as the row both engines write: ``id`` (the copy's, or a new UUID), ``tid``
    (its template's id), ``queue``, ``name``, ``payload`` and ``error`` (JSON
    texts, None: the template's), ``at``, ``due`` and ``lease`` (epoch
    seconds; ``lease`` None when the template holds no lease). Raises
    KeyError for a status without a template."""
    for c in copies:
        t = templates[c.status]
        lease = None
        if t.lease_expires_at is not None and t.started_at is not None:
            lease = c.at + (t.lease_expires_at - t.started_at).total_seconds()
        error = None
        if c.message is not None and t.error is not None:
            error = orjson.dumps({**t.error, "message": c.message}).decode()
        yield {
            "id": c.id or str(uuid.uuid4()),
            "tid": t.id,
            "queue": c.queue,
            "name": c.name,
            "payload": None if c.payload is None else orjson.dumps(c.payload).decode(),
            "error": error,
            "at": c.at,
            "due": c.at if c.due_at is None else c.due_at,
            "lease": lease,
        }
