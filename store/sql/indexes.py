"""The indexes of the SQL store's tables (``store/sql/schema.py``), declared
apart from the tables: they are DDL, which only the migrations and the schema
tests need. Their PostgreSQL- and SQLite-only options (partial indexes, GIN)
make SQLAlchemy load both dialects, ~3 MB in a SQLite worker that never
creates an index, and the statements the store runs do not need them.

Importing this module adds them to the tables once; ``metadata`` is then the
whole schema, the one the migrations build (a test compares the two).
"""

from __future__ import annotations

from sqlalchemy import Index, text

from store.sql.schema import attempts, job_deps, job_events, job_logs, jobs, metadata, rate_starts, records
from store.sql.schema import unique_keys as keys

j = jobs.c

INDEXES: tuple[Index, ...] = (
    # Claim: due jobs of a queue, highest priority first, oldest due first.
    Index(
        "leasehold_ix_jobs_ready",
        j.queue,
        text("priority DESC"),
        j.due_at,
        j.id,
        postgresql_where=text("status IN (100, 200)"),
        sqlite_where=text("status IN (100, 200)"),
    ),
    # Expiry (store/sql/expiry.py): the jobs of a queue that can still expire, soonest first.
    Index(
        "leasehold_ix_jobs_expiry",
        j.queue,
        j.expires_at,
        postgresql_where=text("expires_at IS NOT NULL AND status IN (100, 200)"),
        sqlite_where=text("expires_at IS NOT NULL AND status IN (100, 200)"),
    ),
    # Recovery reads only expired leases.
    Index(
        "leasehold_ix_jobs_lease",
        j.lease_expires_at,
        postgresql_where=text("status = 300"),
        sqlite_where=text("status = 300"),
    ),
    # Keyset paging, newest update first, per status / queue / name / all.
    Index("leasehold_ix_jobs_status_updated", j.status, j.last_updated_at, j.id),
    Index("leasehold_ix_jobs_queue_updated", j.queue, j.last_updated_at, j.id),
    Index("leasehold_ix_jobs_name_updated", j.name, j.last_updated_at, j.id),
    Index("leasehold_ix_jobs_updated", j.last_updated_at, j.id),
    Index("leasehold_ux_jobs_idempotency_key", j.idempotency_key, unique=True),
    # Search by payload field, PostgreSQL only: payload @> '{"key": value}' (migration 0005).
    Index(
        "leasehold_ix_jobs_payload",
        j.payload,
        postgresql_using="gin",
        postgresql_ops={"payload": "jsonb_path_ops"},
    ).ddl_if(dialect="postgresql"),
    Index("leasehold_ix_job_events_job", job_events.c.job_id, job_events.c.id),
    # The audit log: operator actions only.
    Index(
        "leasehold_ix_job_events_audit",
        job_events.c.id,
        postgresql_where=text("actor LIKE 'operator:%'"),
        sqlite_where=text("actor LIKE 'operator:%'"),
    ),
    Index("leasehold_ix_unique_keys_job", keys.c.job_id),
    Index("leasehold_ix_attempts_job", attempts.c.job_id, attempts.c.id),
    Index("leasehold_ix_job_logs_job", job_logs.c.job_id, job_logs.c.attempt, job_logs.c.id),
    # Records: a kind paged and pruned by score; expired records pruned by expiry.
    Index("leasehold_ix_records_score", records.c.kind, records.c.score),
    Index(
        "leasehold_ix_records_expires",
        records.c.kind,
        records.c.expires_at,
        postgresql_where=text("expires_at IS NOT NULL"),
        sqlite_where=text("expires_at IS NOT NULL"),
    ),
    # Flow control: a batch's jobs (only jobs of a batch are in it), a child's
    # parents, the rate window of a queue and of its limit keys.
    Index(
        "leasehold_ix_jobs_batch",
        j.batch_id,
        j.status,
        postgresql_where=text("batch_id IS NOT NULL"),
        sqlite_where=text("batch_id IS NOT NULL"),
    ),
    Index("leasehold_ix_job_deps_child", job_deps.c.child_id),
    Index("leasehold_ix_rate_starts", rate_starts.c.queue, rate_starts.c.limit_key, rate_starts.c.at),
)


def declared_for(item: object, dialect: str) -> bool:
    """Whether a schema item (an index) exists on ``dialect``: False for one
    declared with ``ddl_if`` for another dialect (leasehold_ix_jobs_payload)."""
    condition = getattr(item, "_ddl_if", None)
    return condition is None or condition.dialect in (None, dialect)


__all__ = ["INDEXES", "declared_for", "metadata"]
