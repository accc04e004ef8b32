"""Initial schema: jobs, job_events, counters, workers, locks, recovery_runs.

Every name is prefixed ``leasehold_``. Releases before revision 0002 ran
this revision without the prefix (``create_schema("")``) and kept their
version in ``alembic_version``; revision 0002 renames what they created, so
a database never holds an unprefixed Leasehold table it did not already have
(an application's own ``jobs`` table stays out of the way).

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

Json = sa.JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
WAITING = sa.text("status IN (100, 200)")
RUNNING = sa.text("status = 300")
PREFIX = "leasehold_"
TABLES = ("jobs", "job_events", "counters", "workers", "locks", "recovery_runs")


def upgrade() -> None:
    create_schema(PREFIX)


def downgrade() -> None:
    for table in reversed(TABLES):
        op.drop_table(PREFIX + table)


def create_schema(prefix: str) -> None:
    """Create the 0001 schema with every table, index and named constraint
    name prefixed ``prefix`` (``""``: as releases before 0002 named them)."""
    op.create_table(
        prefix + "jobs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("queue", sa.String(100), nullable=False),
        sa.Column("status", sa.SmallInteger, nullable=False),
        sa.Column("priority", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("payload", Json),
        sa.Column("headers", Json),
        sa.Column("route_params", Json),
        sa.Column("query_params", Json),
        sa.Column("result", Json),
        sa.Column("error", Json),
        sa.Column("retry_count", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("max_retries", sa.Integer, nullable=False),
        sa.Column("lease_expirations", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("due_at", sa.Double, nullable=False),
        sa.Column("retry_delay_until", sa.Double),
        sa.Column("worker_id", sa.String(200)),
        sa.Column("lease_token", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("lease_expires_at", sa.Double),
        sa.Column("last_heartbeat_at", sa.Double),
        sa.Column("timeout_seconds", sa.Double, nullable=False),
        sa.Column("lease_ttl_seconds", sa.Double),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("started_at", sa.Double),
        sa.Column("completed_at", sa.Double),
        sa.Column("last_updated_at", sa.Double, nullable=False),
        sa.Column("idempotency_key", sa.String(200)),
    )
    op.create_index(
        prefix + "ix_jobs_ready",
        prefix + "jobs",
        ["queue", sa.text("priority DESC"), "due_at", "id"],
        postgresql_where=WAITING,
        sqlite_where=WAITING,
    )
    op.create_index(
        prefix + "ix_jobs_lease",
        prefix + "jobs",
        ["lease_expires_at"],
        postgresql_where=RUNNING,
        sqlite_where=RUNNING,
    )
    op.create_index(prefix + "ix_jobs_status_updated", prefix + "jobs", ["status", "last_updated_at", "id"])
    op.create_index(prefix + "ix_jobs_queue_updated", prefix + "jobs", ["queue", "last_updated_at", "id"])
    op.create_index(prefix + "ix_jobs_name_updated", prefix + "jobs", ["name", "last_updated_at", "id"])
    op.create_index(prefix + "ix_jobs_updated", prefix + "jobs", ["last_updated_at", "id"])
    op.create_index(prefix + "ux_jobs_idempotency_key", prefix + "jobs", ["idempotency_key"], unique=True)

    op.create_table(
        prefix + "job_events",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(36), nullable=False),
        sa.Column("at", sa.Double, nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("from_status", sa.SmallInteger),
        sa.Column("to_status", sa.SmallInteger),
        sa.Column("actor", sa.String(200)),
        sa.Column("token", sa.BigInteger),
        sa.Column("message", sa.Text),
    )
    op.create_index(prefix + "ix_job_events_job", prefix + "job_events", ["job_id", "id"])
    audit = sa.text("actor LIKE 'operator:%'")
    op.create_index(
        prefix + "ix_job_events_audit",
        prefix + "job_events",
        ["id"],
        postgresql_where=audit,
        sqlite_where=audit,
    )

    op.create_table(
        prefix + "counters",
        sa.Column("key", sa.String(160), nullable=False),
        sa.Column("shard", sa.SmallInteger, nullable=False),
        sa.Column("n", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("key", "shard", name=prefix + "pk_counters"),
    )
    op.create_table(
        prefix + "workers",
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("queues", Json, nullable=False),
        sa.Column("concurrency", sa.Integer, nullable=False),
        sa.Column("jobs_in_hand", Json, nullable=False),
        sa.Column("started_at", sa.Double, nullable=False),
        sa.Column("last_seen_at", sa.Double, nullable=False),
    )
    op.create_table(
        prefix + "locks",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("expires_at", sa.Double, nullable=False),
    )
    op.create_table(
        prefix + "recovery_runs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("started_at", sa.Double, nullable=False),
        sa.Column("finished_at", sa.Double, nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("trigger", sa.String(100), nullable=False),
        sa.Column("recovered", sa.Integer, nullable=False),
        sa.Column("failed", sa.Integer, nullable=False),
        sa.Column("duration_ms", sa.Double, nullable=False),
    )
    op.create_index(prefix + "ix_recovery_runs_started", prefix + "recovery_runs", ["started_at"])
