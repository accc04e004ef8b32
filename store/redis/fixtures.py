"""Bulk fixtures of the Redis store for the benchmarks at scale (bench/scale.py,
bench/console_load.py): copies of one template job the store itself made,
written by the library's ``copy_jobs`` function (lua/copy_jobs.lua) as the
store's own functions would have left them: job hash and events, listing
zsets, ready or scheduled zset, counters and the narrowest history width.
Seconds for a million jobs instead of minutes through the lifecycle; the
layout stays the store's business (docs/architecture.md, Redis key schema)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from store.redis.store import RedisStore

#: Copies one function call writes (a call blocks the server a few ms).
CHUNK = 1000


@dataclass(frozen=True, slots=True)
class Copy:
    """One copy: its id, its time (epoch seconds: created, started,
    completed, last updated, its events' times) and, when not None, its own
    name, payload and error (JSON texts) and due time (epoch seconds;
    default its time)."""

    id: str
    at: float
    name: str | None = None
    payload: str | None = None
    error: str | None = None
    due_at: float | None = None


def copy_jobs(
    store: RedisStore, template_id: str, queue: str, copies: Iterable[Copy], kinds: Mapping[str, int]
) -> int:
    """Write ``copies`` of job ``template_id`` in ``queue``, CHUNK a call;
    ``kinds``: the events one copy stands for, by kind (the template's
    ``store.events``). Returns how many were written. Raises StoreUnavailable."""
    head = [template_id, queue, " ".join(f"{kind} {n}" for kind, n in kinds.items())]
    written, args = 0, []
    for copy in copies:
        due = "" if copy.due_at is None else repr(copy.due_at)
        args += [copy.id, repr(copy.at), copy.name or "", copy.payload or "", copy.error or "", due]
        if len(args) == 6 * CHUNK:
            written += int(store._eval(store._lua.copy_jobs, store._route, store._args(*head, *args)))
            args = []
    if args:
        written += int(store._eval(store._lua.copy_jobs, store._route, store._args(*head, *args)))
    return written
