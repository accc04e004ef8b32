"""The Redis half of the fixture loader (store/fixtures.py): copies of a
template job written by lua/fixtures.lua, CHUNK copies of one status a call
(a call blocks the server a few milliseconds), which indexes and counts each
copy through the helpers of lua/lib/job.lua.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from store.copies import AT_FIELDS, DUE_FIELDS, LEASE_FIELDS
from store.lifecycle import JobStatus
from store.models import Job
from store.redis.store import RedisStore

#: Copies a function call.
CHUNK = 1000


def _text(value: Any) -> str:
    """An ARGV value: '' for None, a float as ``repr`` (reads back as the same double)."""
    if value is None:
        return ""
    return repr(float(value)) if isinstance(value, float | int) else str(value)


def load_rows(store: RedisStore, templates: Mapping[JobStatus, Job], rows: Iterator[dict[str, Any]]) -> int:
    """Write the copy rows of store.fixtures.copy_rows, grouped by template,
    CHUNK a call. Returns how many."""
    heads = {}
    for template in templates.values():
        kinds = " ".join(str(getattr(e.kind, "value", e.kind)) for e in store.events(template.id))
        heads[template.id] = [
            template.id,
            " ".join(AT_FIELDS),
            " ".join(DUE_FIELDS),
            " ".join(LEASE_FIELDS),
            kinds,
        ]
    groups: dict[str, list[str]] = {tid: [] for tid in heads}
    n = 0

    def flush(tid: str) -> None:
        args = groups[tid]
        if args:
            store._eval(store._lua.fixtures, store._route, store._args(*heads[tid], *args))
            groups[tid] = []

    for row in rows:
        args = groups[row["tid"]]
        args += [_text(row[k]) for k in ("id", "queue", "name", "payload", "error", "at", "due", "lease")]
        n += 1
        if len(args) == 8 * CHUNK:
            flush(row["tid"])
    for tid in heads:
        flush(tid)
    return n
