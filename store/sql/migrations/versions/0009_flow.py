"""Flow control: queue limits on leasehold_queues, the rate window
(leasehold_rate_starts), job dependencies (leasehold_job_deps), batches
(leasehold_batches) and the flow columns of leasehold_jobs. Every new jobs
column is nullable or has a default, so existing rows need no rewrite.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

#: New columns: (table, column, type or (type, constraints)).
COLUMNS = (
    ("leasehold_jobs", "limit_key", sa.String(200)),
    ("leasehold_jobs", "batch_id", sa.String(36)),
    ("leasehold_jobs", "pending_parents", sa.Integer()),
    ("leasehold_jobs", "on_parent_failure", sa.String(10)),
    ("leasehold_jobs", "has_children", (sa.SmallInteger(), "DEFAULT 0 NOT NULL")),
    ("leasehold_queues", "limited", (sa.SmallInteger(), "DEFAULT 0 NOT NULL")),
    ("leasehold_queues", "concurrency", sa.Integer()),
    ("leasehold_queues", "per_key_concurrency", sa.Integer()),
    ("leasehold_queues", "rate_limit", sa.Integer()),
    ("leasehold_queues", "rate_period_s", sa.Double()),
    ("leasehold_queues", "per_key_rate_limit", sa.Integer()),
    ("leasehold_queues", "per_key_rate_period_s", sa.Double()),
)


def upgrade() -> None:
    # Plain ADD COLUMN in SQL both engines take: Alembic's SQLite add_column
    # would rebuild leasehold_ix_jobs_ready without its "priority DESC".
    dialect = op.get_bind().dialect
    for table, column, kind in COLUMNS:
        type_, extra = kind if isinstance(kind, tuple) else (kind, "")
        op.execute(f"ALTER TABLE {table} ADD COLUMN {column} {type_.compile(dialect=dialect)} {extra}")
    op.create_table(
        "leasehold_rate_starts",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("queue", sa.String(100), nullable=False),
        sa.Column("limit_key", sa.String(200)),
        sa.Column("at", sa.Double(), nullable=False),
    )
    op.create_index("leasehold_ix_rate_starts", "leasehold_rate_starts", ["queue", "limit_key", "at"])
    op.create_table(
        "leasehold_job_deps",
        sa.Column("parent_id", sa.String(36), nullable=False),
        sa.Column("child_id", sa.String(36), nullable=False),
        sa.Column("done", sa.SmallInteger(), nullable=False, server_default=sa.text("0")),
        sa.PrimaryKeyConstraint("parent_id", "child_id", name="leasehold_pk_job_deps"),
    )
    op.create_index("leasehold_ix_job_deps_child", "leasehold_job_deps", ["child_id"])
    op.create_table(
        "leasehold_batches",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("callback_job_id", sa.String(36)),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("canceled_at", sa.Double()),
        sa.Column("canceled_by", sa.String(200)),
    )
    op.create_index(
        "leasehold_ix_jobs_batch",
        "leasehold_jobs",
        ["batch_id", "status"],
        postgresql_where=sa.text("batch_id IS NOT NULL"),
        sqlite_where=sa.text("batch_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("leasehold_ix_jobs_batch", "leasehold_jobs")
    op.drop_table("leasehold_batches")
    op.drop_index("leasehold_ix_job_deps_child", "leasehold_job_deps")
    op.drop_table("leasehold_job_deps")
    op.drop_index("leasehold_ix_rate_starts", "leasehold_rate_starts")
    op.drop_table("leasehold_rate_starts")
    for table, column, _ in reversed(COLUMNS):
        op.drop_column(table, column)
