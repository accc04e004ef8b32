"""Initial schema: jobs, job_events, counters, workers, locks, recovery_runs.

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


def upgrade() -> None:
    op.create_table(
        "jobs",
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
        "ix_jobs_ready",
        "jobs",
        ["queue", sa.text("priority DESC"), "due_at", "id"],
        postgresql_where=WAITING,
        sqlite_where=WAITING,
    )
    op.create_index(
        "ix_jobs_lease", "jobs", ["lease_expires_at"], postgresql_where=RUNNING, sqlite_where=RUNNING
    )
    op.create_index("ix_jobs_status_updated", "jobs", ["status", "last_updated_at", "id"])
    op.create_index("ix_jobs_queue_updated", "jobs", ["queue", "last_updated_at", "id"])
    op.create_index("ix_jobs_name_updated", "jobs", ["name", "last_updated_at", "id"])
    op.create_index("ix_jobs_updated", "jobs", ["last_updated_at", "id"])
    op.create_index("ux_jobs_idempotency_key", "jobs", ["idempotency_key"], unique=True)

    op.create_table(
        "job_events",
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
    op.create_index("ix_job_events_job", "job_events", ["job_id", "id"])
    audit = sa.text("actor LIKE 'operator:%'")
    op.create_index("ix_job_events_audit", "job_events", ["id"], postgresql_where=audit, sqlite_where=audit)

    op.create_table(
        "counters",
        sa.Column("key", sa.String(160), nullable=False),
        sa.Column("shard", sa.SmallInteger, nullable=False),
        sa.Column("n", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("key", "shard", name="pk_counters"),
    )
    op.create_table(
        "workers",
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
        "locks",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("expires_at", sa.Double, nullable=False),
    )
    op.create_table(
        "recovery_runs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("started_at", sa.Double, nullable=False),
        sa.Column("finished_at", sa.Double, nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("trigger", sa.String(100), nullable=False),
        sa.Column("recovered", sa.Integer, nullable=False),
        sa.Column("failed", sa.Integer, nullable=False),
        sa.Column("duration_ms", sa.Double, nullable=False),
    )
    op.create_index("ix_recovery_runs_started", "recovery_runs", ["started_at"])


def downgrade() -> None:
    for table in ("recovery_runs", "locks", "workers", "counters", "job_events", "jobs"):
        op.drop_table(table)
