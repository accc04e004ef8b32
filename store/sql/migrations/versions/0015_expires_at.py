"""Expiring jobs: leasehold_jobs.expires_at (epoch seconds, NULL for a job
that never expires), read by the claim (lifecycle.Operation.EXPIRE). An index
of the jobs that can still expire (Queued or Scheduled with an expires_at) lets
the claim find the expired ones of its queues without walking the ready ones
(store/sql/expiry.py).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("leasehold_jobs", sa.Column("expires_at", sa.Double(), nullable=True))
    op.create_index(
        "leasehold_ix_jobs_expiry",
        "leasehold_jobs",
        ["queue", "expires_at"],
        postgresql_where=sa.text("expires_at IS NOT NULL AND status IN (100, 200)"),
        sqlite_where=sa.text("expires_at IS NOT NULL AND status IN (100, 200)"),
    )


def downgrade() -> None:
    op.drop_index("leasehold_ix_jobs_expiry", table_name="leasehold_jobs")
    op.drop_column("leasehold_jobs", "expires_at")
