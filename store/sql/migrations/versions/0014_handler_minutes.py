"""Handler metrics: leasehold_handler_minutes keeps per handler and minute
the succeeded, failed and retried counts and the run-time bins
(store/handler_metrics.py), written with the outcome they count.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "leasehold_handler_minutes",
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("bucket", sa.BigInteger(), nullable=False),
        sa.Column("field", sa.String(16), nullable=False),
        sa.Column("shard", sa.SmallInteger(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", "bucket", "field", "shard", name="leasehold_pk_handler_minutes"),
    )


def downgrade() -> None:
    op.drop_table("leasehold_handler_minutes")
