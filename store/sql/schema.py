"""SQLAlchemy 2.0 schema of the SQL store (SQLite and PostgreSQL).

Times are epoch seconds (double precision) read from the store's clock, so
both engines compare and index them the same way. The Alembic migrations in
``store/sql/migrations`` create exactly this schema (a test compares them).

The indexes are declared in ``store/sql/indexes.py`` (DDL only). Every
table, index and named constraint is prefixed ``leasehold_`` (the
0001 name with the prefix: ``leasehold_ix_jobs_ready``), so Leasehold can
share an application's database; PostgreSQL's default names follow the
table's (``leasehold_jobs_pkey``, ``leasehold_job_events_id_seq``). The
Python names (``jobs``, ``job_events``, ...) are the 0001 table names.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Double,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Table,
    Text,
    text,
)
from sqlalchemy.types import TypeDecorator, TypeEngine

from store.spec import MAX_UNIQUE_KEY_LEN

#: The tables; ``store.sql.indexes`` adds the indexes (DDL only).
metadata = MetaData()


class JsonType(TypeDecorator[Any]):
    """JSON, JSONB on PostgreSQL; Python None stays SQL NULL. The PostgreSQL
    dialect is imported when a PostgreSQL engine first uses the type, not
    with the schema: a SQLite process never loads it (~3 MB)."""

    impl = JSON
    cache_ok = True

    def __init__(self) -> None:
        super().__init__(none_as_null=True)

    def load_dialect_impl(self, dialect: Any) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB(none_as_null=True))
        return dialect.type_descriptor(JSON(none_as_null=True))


Json = JsonType()
#: Auto-increment ids: BIGINT on PostgreSQL, INTEGER (the rowid) on SQLite.
BigId = BigInteger().with_variant(Integer(), "sqlite")

jobs = Table(
    "leasehold_jobs",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("queue", String(100), nullable=False),
    Column("status", SmallInteger, nullable=False),
    Column("priority", Integer, nullable=False, server_default=text("0")),
    Column("payload", Json),
    Column("headers", Json),
    Column("route_params", Json),
    Column("query_params", Json),
    Column("result", Json),
    Column("error", Json),
    Column("retry_count", Integer, nullable=False, server_default=text("0")),
    Column("max_retries", Integer, nullable=False),
    Column("lease_expirations", Integer, nullable=False, server_default=text("0")),
    # When a Queued or Scheduled job may be claimed (enqueue time, or the end of its backoff).
    Column("due_at", Double, nullable=False),
    Column("retry_delay_until", Double),
    Column("worker_id", String(200)),
    Column("lease_token", BigInteger, nullable=False, server_default=text("0")),
    Column("lease_expires_at", Double),
    Column("last_heartbeat_at", Double),
    Column("timeout_seconds", Double, nullable=False),
    Column("lease_ttl_seconds", Double),
    Column("created_at", Double, nullable=False),
    Column("started_at", Double),
    Column("completed_at", Double),
    Column("last_updated_at", Double, nullable=False),
    Column("idempotency_key", String(200)),
    # {"fraction", "message", "at"} as the handler last reported it.
    Column("progress", Json),
    # Flow control: the partition key of per-key limits; the batch a job
    # belongs to; for a job with parents, how many have not finished and what
    # a failed parent does; whether any job waits for this one.
    Column("limit_key", String(200)),
    Column("batch_id", String(36)),
    Column("pending_parents", Integer),
    Column("on_parent_failure", String(10)),
    Column("has_children", SmallInteger, nullable=False, server_default=text("0")),
    # When a job not started by then is never run (a claim expires it: lifecycle.Operation.EXPIRE).
    Column("expires_at", Double),
)
# PostgreSQL keeps a fifth of each leasehold_jobs page free for the row versions
# of claims and acks (fillfactor 80): set by migration 0006, which says why and
# what it measured. Not a postgresql_with= option here: that would load the
# PostgreSQL dialect into every SQLite process (tests/unit/test_imports.py).

job_events = Table(
    "leasehold_job_events",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("job_id", String(36), nullable=False),
    Column("at", Double, nullable=False),
    Column("kind", String(40), nullable=False),
    Column("from_status", SmallInteger),
    Column("to_status", SmallInteger),
    Column("actor", String(200)),
    Column("token", BigInteger),
    Column("message", Text),
)

# Sharded counters: job counts by (status, queue) and event counts by kind,
# kept in the same transaction as each change. Writers in different processes
# add to different shards, so hot counters do not serialise PostgreSQL claims.
counters = Table(
    "leasehold_counters",
    metadata,
    Column("key", String(160), nullable=False),
    Column("shard", SmallInteger, nullable=False),
    Column("n", BigInteger, nullable=False),
    PrimaryKeyConstraint("key", "shard", name="leasehold_pk_counters"),
)

# Records of the record port (store/ports.py): locks (holds), the worker
# registry, run histories, bulk operations, schedules, counting windows, each
# a ``kind`` of record; ``value`` is the record's fields, ``score`` what its
# kind is paged and pruned by, ``expires_at`` when it reads as absent.
records = Table(
    "leasehold_records",
    metadata,
    Column("kind", String(80), nullable=False),
    Column("key", String(200), nullable=False),
    Column("score", Double),
    Column("expires_at", Double),
    Column("value", Json, nullable=False),
    PrimaryKeyConstraint("kind", "key", name="leasehold_pk_records"),
)

# Queues an operator paused or resumed (a queue with no row runs).
queues = Table(
    "leasehold_queues",
    metadata,
    Column("name", String(100), primary_key=True),
    Column("paused", SmallInteger, nullable=False, server_default=text("0")),
    Column("changed_by", String(200)),
    Column("changed_at", Double, nullable=False),
    # Flow control limits (store/flow_rules.py); ``limited`` is 1 when any is set,
    # so the claim of an unlimited queue reads nothing else.
    Column("limited", SmallInteger, nullable=False, server_default=text("0")),
    Column("concurrency", Integer),
    Column("per_key_concurrency", Integer),
    Column("rate_limit", Integer),
    Column("rate_period_s", Double),
    Column("per_key_rate_limit", Integer),
    Column("per_key_rate_period_s", Double),
)

# Unique jobs: the job a key names and until when it holds the key after the
# job finished (created_at + unique_for).
unique_keys = Table(
    "leasehold_unique_keys",
    metadata,
    Column("key", String(MAX_UNIQUE_KEY_LEN), primary_key=True),
    Column("job_id", String(36), nullable=False),
    Column("expires_at", Double, nullable=False),
)

# Every failed attempt of a job (handler error, timeout, expired lease), with
# its own error: a later failure never hides an earlier cause.
attempts = Table(
    "leasehold_attempts",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("job_id", String(36), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("token", BigInteger, nullable=False),
    Column("worker_id", String(200)),
    Column("error", Json),
    Column("started_at", Double),
    Column("finished_at", Double, nullable=False),
)

# The lines a handler logged with ``ctx.log``, by job and attempt (store/job_logs.py):
# at most LEASEHOLD_JOB_LOG_LINES an attempt, the newest kept; removed with the job.
job_logs = Table(
    "leasehold_job_logs",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("job_id", String(36), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("at", Double, nullable=False),
    Column("level", String(10), nullable=False),
    Column("message", Text, nullable=False),
)

# Time-bucketed counters per queue and event kind, for the history graphs:
# ``width`` 60 (per minute, kept 48 h) or 3600 (per hour, kept 30 days),
# ``bucket`` its start (epoch seconds), sharded like the counters.
history = Table(
    "leasehold_history",
    metadata,
    Column("width", Integer, nullable=False),
    Column("bucket", Double, nullable=False),
    Column("queue", String(100), nullable=False),
    Column("kind", String(40), nullable=False),
    Column("shard", SmallInteger, nullable=False),
    Column("n", BigInteger, nullable=False),
    PrimaryKeyConstraint("width", "bucket", "queue", "kind", "shard", name="leasehold_pk_history"),
)

# Per-handler minute buckets (store/handler_metrics.py): ``field`` is an
# outcome or a run-time bin, ``n`` its count, added to this process's shard.
handler_minutes = Table(
    "leasehold_handler_minutes",
    metadata,
    Column("name", String(200), nullable=False),
    Column("bucket", BigInteger, nullable=False),
    Column("field", String(16), nullable=False),
    Column("shard", SmallInteger, nullable=False),
    Column("n", BigInteger, nullable=False),
    PrimaryKeyConstraint("name", "bucket", "field", "shard", name="leasehold_pk_handler_minutes"),
)

# Starts of jobs of rate-limited queues (the sliding window of store/flow_rules.py),
# written by the claims of those queues only and pruned by them.
rate_starts = Table(
    "leasehold_rate_starts",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("queue", String(100), nullable=False),
    Column("limit_key", String(200)),
    Column("at", Double, nullable=False),
)

# Dependencies: ``child_id`` waits for ``parent_id``; ``done`` once the parent
# has finished (its end was applied to the child).
job_deps = Table(
    "leasehold_job_deps",
    metadata,
    Column("parent_id", String(36), nullable=False),
    Column("child_id", String(36), nullable=False),
    Column("done", SmallInteger, nullable=False, server_default=text("0")),
    PrimaryKeyConstraint("parent_id", "child_id", name="leasehold_pk_job_deps"),
)

# Batches and chains: a group of jobs (``leasehold_jobs.batch_id``) and the
# callback job that waits for all of them.
batches = Table(
    "leasehold_batches",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("kind", String(10), nullable=False),
    Column("size", Integer, nullable=False),
    Column("callback_job_id", String(36)),
    Column("created_at", Double, nullable=False),
    Column("canceled_at", Double),
    Column("canceled_by", String(200)),
)
