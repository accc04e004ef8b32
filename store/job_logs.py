"""Job logs: the lines a handler logs with ``ctx.log`` (workers/job_log_book.py),
kept with the job's attempt (docs/architecture.md, "Job logs").

Each line is ``{"attempt", "at", "level", "message"}``: ``attempt`` 1 for
the first run (a job's retry_count + 1), ``at`` epoch seconds of the worker's
clock when the handler logged it, ``level`` a logging level name, ``message``
the formatted text with each NUL replaced (store/spec.py ``scrub_nul``: text
for people) and cut to MAX_LINE_CHARS. An attempt keeps its newest ``keep``
lines (LEASEHOLD_JOB_LOG_LINES, default 1000).

Written by the worker in batches (``append_logs``: one transaction on SQL,
one pipeline on Redis, whatever the number of lines and jobs), never one call
a line; read in order after a cursor (``read_logs``). Storage, one small
module an engine:

* SQL (store/sql/job_logs.py): rows of ``leasehold_job_logs`` (migration
  0013), indexed by (job, attempt, id); the cursor is the row id; removed
  with their job in the one removal path (``SqlOperatingPart.remove_jobs``).
* Redis (store/redis/job_logs.py): a list ``{P}:logs:<job>:<attempt>`` a
  job attempt, and ``{P}:logs_meta:<job>`` (a hash: lines ever pushed an
  attempt, the cursor's base); the cursor is ``attempt * CURSOR_SPAN +
  line number``. Lines of a job that is gone are deleted by ``sweep_logs``
  (maintenance, in bounded batches, from the zset ``{P}:logs_jobs`` of jobs
  with lines): the library's removal scripts are not changed; a gone job's
  lines are never read (``read_logs`` of an unknown job is JobNotFound).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from store.base import JobStore
from store.log_lines import (  # noqa: F401 - the door re-exports the value object and bounds
    CURSOR_SPAN,
    DEFAULT_LINES,
    LEVELS,
    MAX_LINE_CHARS,
    MAX_READ,
    LogLine,
    clean_message,
)


def _engine(store: JobStore) -> Any:
    """The engine module of ``store`` (imported only when used)."""
    kinds = {cls.__module__ for cls in type(store).__mro__}
    if "store.sql.store" in kinds:
        from store.sql import job_logs as sql

        return sql
    if "store.redis.store" in kinds:
        from store.redis import job_logs as redis

        return redis
    if "store.redis.shards.sharded_store" in kinds:
        from store.redis.shards import sharded_job_logs as sharded

        return sharded
    raise TypeError(f"{type(store).__name__} keeps no job logs")


def append_logs(store: JobStore, lines: Sequence[LogLine], keep: int = DEFAULT_LINES) -> None:
    """Store ``lines`` (any jobs, any attempts) in one call, each attempt
    then keeping its newest ``keep``. Raises StoreUnavailable (nothing or
    everything written on SQL; on Redis an attempt's lines go together)."""
    if lines:
        _engine(store).append(store, lines, max(1, int(keep)))


def read_logs(
    store: JobStore, job_id: str, attempt: int | None = None, after: int = 0, limit: int = MAX_READ
) -> tuple[list[dict[str, Any]], int]:
    """``(lines, next_after)``: up to ``limit`` lines of the job (of one
    ``attempt``, or all of them by attempt), oldest first, after the cursor
    ``after`` (0: from the start; a previous answer's ``next_after``);
    ``next_after`` is the last line's cursor (``after`` when none came).
    Raises JobNotFound."""
    store.get(job_id)
    return _engine(store).read(store, job_id, attempt, max(0, int(after)), max(1, min(MAX_READ, limit)))


def sweep_logs(store: JobStore, limit: int = 500) -> int:
    """Delete the lines of up to ``limit`` jobs that are gone (Redis; SQL
    deletes them with their job: 0). How many jobs' lines went."""
    return _engine(store).sweep(store, limit)
