"""Operating over time: paused queues, unique-job keys, maintenance runs
(retention, worker pruning) and periodic-job schedules.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

Json = sa.JSON(none_as_null=True).with_variant(sa.dialects.postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    op.create_table(
        "leasehold_queues",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("paused", sa.SmallInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("changed_by", sa.String(200)),
        sa.Column("changed_at", sa.Double, nullable=False),
    )
    op.create_table(
        "leasehold_unique_keys",
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("job_id", sa.String(36), nullable=False),
        sa.Column("expires_at", sa.Double, nullable=False),
    )
    op.create_index("leasehold_ix_unique_keys_job", "leasehold_unique_keys", ["job_id"])
    op.create_table(
        "leasehold_maintenance_runs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("task", sa.String(40), nullable=False),
        sa.Column("started_at", sa.Double, nullable=False),
        sa.Column("finished_at", sa.Double, nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("duration_ms", sa.Double, nullable=False),
        sa.Column("longest_batch_ms", sa.Double, nullable=False),
    )
    op.create_index(
        "leasehold_ix_maintenance_runs_task", "leasehold_maintenance_runs", ["task", "started_at"]
    )
    op.create_table(
        "leasehold_schedules",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("handler", sa.String(200), nullable=False),
        sa.Column("cron", sa.String(200), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("queue", sa.String(100), nullable=False),
        sa.Column("payload", Json),
        sa.Column("catch_up", sa.SmallInteger, nullable=False, server_default=sa.text("1")),
        sa.Column("enabled", sa.SmallInteger, nullable=False, server_default=sa.text("1")),
        sa.Column("last_tick_at", sa.Double),
        sa.Column("last_job_id", sa.String(36)),
        sa.Column("updated_at", sa.Double, nullable=False),
    )


def downgrade() -> None:
    for table in (
        "leasehold_schedules",
        "leasehold_maintenance_runs",
        "leasehold_unique_keys",
        "leasehold_queues",
    ):
        op.drop_table(table)
