"""The console at scale: every failed attempt kept (leasehold_attempts), a
job's progress, commands for workers (quiet, stop), time-bucketed history
counters per queue (leasehold_history), failure counters shared by every web
process (leasehold_failures: login throttling), and bulk operations run in
the background (leasehold_operations).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

Json = sa.JSON(none_as_null=True).with_variant(sa.dialects.postgresql.JSONB(none_as_null=True), "postgresql")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "leasehold_attempts",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(36), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("token", sa.BigInteger, nullable=False),
        sa.Column("worker_id", sa.String(200)),
        sa.Column("error", Json),
        sa.Column("started_at", sa.Double),
        sa.Column("finished_at", sa.Double, nullable=False),
    )
    op.create_index("leasehold_ix_attempts_job", "leasehold_attempts", ["job_id", "id"])
    with op.batch_alter_table("leasehold_jobs") as batch:
        batch.add_column(sa.Column("progress", Json))
    with op.batch_alter_table("leasehold_workers") as batch:
        batch.add_column(sa.Column("command", sa.String(20)))
        batch.add_column(sa.Column("command_by", sa.String(200)))
    op.create_table(
        "leasehold_history",
        sa.Column("width", sa.Integer, nullable=False),
        sa.Column("bucket", sa.Double, nullable=False),
        sa.Column("queue", sa.String(100), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("shard", sa.SmallInteger, nullable=False),
        sa.Column("n", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("width", "bucket", "queue", "kind", "shard", name="leasehold_pk_history"),
    )

    op.create_table(
        "leasehold_failures",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("n", sa.Integer, nullable=False),
        sa.Column("window_end", sa.Double, nullable=False),
    )

    op.create_table(
        "leasehold_operations",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
        sa.Column("body", Json, nullable=False),
    )
    op.create_index("leasehold_ix_operations_created", "leasehold_operations", ["created_at"])


def downgrade() -> None:
    op.drop_index("leasehold_ix_operations_created", "leasehold_operations")
    op.drop_table("leasehold_operations")
    op.drop_table("leasehold_failures")
    op.drop_table("leasehold_history")
    with op.batch_alter_table("leasehold_workers") as batch:
        batch.drop_column("command_by")
        batch.drop_column("command")
    with op.batch_alter_table("leasehold_jobs") as batch:
        batch.drop_column("progress")
    op.drop_index("leasehold_ix_attempts_job", "leasehold_attempts")
    op.drop_table("leasehold_attempts")
