"""Every statement the SQL stores run is one SQLAlchemy can cache.

A statement without a cache key is compiled again on every execution: a
VALUES construct in PostgreSQL's history upsert once cost 10 ms of compiling
per enqueue and per ack (12 ms enqueues instead of 2.5 ms). This runs the
operations of a job's life and of the console on each SQL store and fails on
any statement SQLAlchemy had to compile without a cache key.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.engine.default import NO_CACHE_KEY

from store.base import JobStore
from store.lifecycle import JobStatus as S
from store.models import JobSpec, Lease, WorkerInfo
from tests.conftest import handle_fixture
from tests.store.helpers import ERROR, expire_leases

handle = handle_fixture(["sqlite", "postgresql"])


@pytest.fixture
def uncached() -> Iterator[list[str]]:
    """Statements executed without a cache key while the test runs."""
    found: list[str] = []

    def check(conn, cursor, statement, parameters, context, executemany) -> None:
        compiled = context is not None and context.compiled is not None
        if compiled and context.cache_hit == NO_CACHE_KEY:
            found.append(" ".join(statement.split())[:160])

    event.listen(Engine, "before_cursor_execute", check)
    yield found
    event.remove(Engine, "before_cursor_execute", check)


def test_a_job_life_runs_only_cacheable_statements(store: JobStore, uncached: list[str]) -> None:
    store.worker_heartbeat(WorkerInfo("w-1", "host", 1, ["default"], 2, []))
    store.enqueue("t", {"n": 1})
    store.enqueue("t", {"n": 2}, delay_s=3600, unique_key="u-1")
    store.enqueue_many([JobSpec("t", {"n": i}) for i in range(3)])
    jobs = store.claim("w-1", ["default"], 10)
    store.complete(jobs[0].id, jobs[0].lease_token, {"ok": True})
    store.fail(jobs[1].id, jobs[1].lease_token, ERROR)
    store.heartbeat("w-1", [Lease(jobs[2].id, jobs[2].lease_token)])
    store.report_progress(jobs[2].id, jobs[2].lease_token, 0.5, "half")
    expire_leases(store)
    store.recover_expired()
    queued = store.enqueue("t", {"n": 9})
    store.cancel(queued.id, actor="operator:ann")
    store.requeue(queued.id, actor="operator:ann")
    store.pause_queue("other", actor="operator:ann")
    store.resume_queue("other", actor="operator:ann")
    assert uncached == []


def test_the_console_reads_only_cacheable_statements(store: JobStore, uncached: list[str]) -> None:
    job = store.enqueue("t", {"n": 1, "path": "/a"})
    store.counts()
    store.event_counts()
    store.history(60, 0.0)
    store.history(3600, 0.0, queue="default")
    for filters in ({}, {"status": S.Queued}, {"queue": "default"}, {"name": "t", "queue": "default"}):
        page = store.list_jobs(limit=10, **filters)
        store.list_jobs(limit=10, cursor=page.next_cursor, **filters)
    store.search_jobs(id_part=job.id[-6:])
    store.search_jobs(error="boom")
    store.search_jobs(payload=("path", "/a"))
    store.get(job.id)
    store.events(job.id)
    store.attempts(job.id)
    store.workers()
    store.queue_states()
    store.count_purgeable(3600)
    store.count_jobs(S.Queued, name="t", queue="default")
    store.count_jobs(S.Failed, name="t")
    store.preview_recovery()
    store.recovery_runs()
    store.operations()
    store.schedules()
    assert uncached == []


def test_postgresql_hot_path_statements_fit_psycopgs_query_cache() -> None:
    """psycopg caches the parsing of a query text up to 4,096 characters
    (``_queries.MAX_CACHED_STATEMENT_LENGTH``); a longer one is parsed again
    on every execution. The one-statement changes carry their bookkeeping
    as CTEs (store/sql/bookkeeping.py), which must keep them under it."""
    from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH
    from sqlalchemy.dialects.postgresql import psycopg

    from store.lifecycle import EventKind
    from store.sql import pg_statements as pg
    from store.sql import statements as sql

    now = sql.clock(lambda: 0.0)
    statements = {
        "enqueue": pg.enqueue_jobs_pg(now),
        "enqueue one": pg.enqueue_jobs_pg(now, one=True),
        "claim": pg.with_bookkeeping(pg.claim_pg(now, 1), now, EventKind.CLAIMED),
        "claim of a notice": pg.with_bookkeeping(pg.claim_pg(now, 1, one=True), now, EventKind.CLAIMED),
        "ack": pg.with_bookkeeping(pg.complete_jobs_pg(now), now, EventKind.COMPLETED, ids_only=True),
    }
    dialect = psycopg.dialect()
    lengths = {name: len(str(stmt.compile(dialect=dialect))) for name, stmt in statements.items()}
    assert max(lengths.values()) <= MAX_CACHED_STATEMENT_LENGTH, lengths
