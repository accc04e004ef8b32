"""Bulk fixtures: many jobs of any status written at once, for the benchmarks
(bench/) that need a store already holding up to a million jobs.

Running a million jobs through enqueue, claim and ack takes minutes a store;
a fixture load takes seconds. The jobs are *copies*: ``make_templates`` runs
one job per status through the store's own operations (enqueue; claim; ack,
a failure, a retry pending; cancel), then ``load_copies`` writes each
``Copy`` as its status's template with the copy's own id, queue, name,
payload, error message and times, as the engine's own paths would have
written it then (docs/architecture.md, Stores):

* the job (SQL: a row; Redis: the hash, its ``rank``) and the template's
  events at the copy's time;
* its indexes: SQL's are the table's; Redis's are written by the helpers of
  lua/lib/job.lua (``move``, as enqueue indexes a new job), and the ready,
  scheduled or leases zset as enqueue and claim write them;
* the counters and history buckets the template's events add, bucketed at
  the copy's time (SQL: the bookkeeping statements of store/sql/bookkeeping.py;
  Redis: lib/job.lua ``happen``, ``count_history``, ``flush_counts``), then
  the store's own ``trim_history`` drops (Redis: rolls up) what is past its
  retention.

Not copied: failed attempts (``attempts``), audit entries of the template's
operator actions, wake-up notices. The engines' halves are
store/sql/fixtures.py and store/redis/fixtures.py (lua/fixtures.lua).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from leasehold.urls import store_kind
from store.base import JobStore
from store.copies import AT_FIELDS, DUE_FIELDS, LEASE_FIELDS, Copy, copy_rows
from store.lifecycle import JobStatus
from store.models import Job

S = JobStatus
#: Statuses a template can be made in, in the order ``make_templates`` runs them
#: (Queued last: no claim of a later template takes it).
STATUSES: tuple[JobStatus, ...] = (S.Completed, S.Failed, S.Scheduled, S.InProgress, S.Canceled, S.Queued)
#: The worker that holds the templates' leases.
LOADER = "fixture-loader"
ERROR = {"type": "RuntimeError", "message": "fixture", "traceback": "Traceback …\nRuntimeError: fixture"}


def make_templates(
    store: JobStore,
    statuses: Iterable[JobStatus] = STATUSES,
    queue: str = "default",
    name: str = "fixture",
    payload: Any = None,
) -> dict[JobStatus, Job]:
    """One job of each of ``statuses`` in ``queue``, run through the store's
    own operations: Completed (claimed, acked), Failed (a permanent failure),
    Scheduled (a failure with retries left: a retry pending), InProgress
    (claimed by LOADER), Canceled (by an operator), Queued. Raises ValueError
    when ``queue`` holds a due job already (a claim here would take it)."""
    wanted = set(statuses)
    out: dict[JobStatus, Job] = {}
    for status in (s for s in STATUSES if s in wanted):
        job = store.enqueue(name, payload, queue=queue, max_retries=3)
        if status is S.Canceled:
            out[status] = store.cancel(job.id, actor="operator:fixtures")
        elif status is S.Queued:
            out[status] = job
        else:
            [held] = store.claim(LOADER, [queue], 1)
            if held.id != job.id:
                raise ValueError(f"queue {queue!r} holds due jobs: templates need it empty")
            if status is S.Completed:
                out[status] = store.complete(job.id, held.lease_token, {"ok": True}, LOADER)
            elif status is S.InProgress:
                out[status] = held
            else:
                out[status] = store.fail(job.id, held.lease_token, ERROR, permanent=status is S.Failed)
        assert out[status].status is status, (status, out[status].status)
    return out


def load_copies(store: JobStore, templates: Mapping[JobStatus, Job], copies: Iterable[Copy]) -> int:
    """Write ``copies`` (see the module docstring) in bounded chunks, each one
    atomic unit, then run the store's ``trim_history``. Returns how many were
    written. Raises KeyError for a copy whose status has no template,
    StoreUnavailable when the store is unreachable."""
    rows = copy_rows(templates, copies)
    if store_kind(store.url) == "sql":  # type: ignore[attr-defined]
        from store.sql.fixtures import load_rows
    else:
        from store.redis.fixtures import load_rows  # type: ignore[assignment]
    n = load_rows(store, templates, rows)  # type: ignore[arg-type]
    store.trim_history()
    return n


__all__ = [
    "AT_FIELDS",
    "DUE_FIELDS",
    "LEASE_FIELDS",
    "STATUSES",
    "Copy",
    "copy_rows",
    "load_copies",
    "make_templates",
]
