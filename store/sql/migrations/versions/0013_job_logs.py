"""Job logs: leasehold_job_logs keeps the lines a handler logs with
``ctx.log``, by job and attempt (store/job_logs.py), removed with their job.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "leasehold_job_logs",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(36), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("level", sa.String(10), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
    )
    op.create_index("leasehold_ix_job_logs_job", "leasehold_job_logs", ["job_id", "attempt", "id"])


def downgrade() -> None:
    op.drop_index("leasehold_ix_job_logs_job", "leasehold_job_logs")
    op.drop_table("leasehold_job_logs")
