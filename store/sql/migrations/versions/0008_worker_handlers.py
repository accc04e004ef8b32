"""The handlers each worker serves, published in its registry entry: the
store's handler catalogue is derived from the live workers' lists.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

Json = sa.JSON(none_as_null=True).with_variant(sa.dialects.postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("leasehold_workers") as batch:
        batch.add_column(sa.Column("handlers", Json))


def downgrade() -> None:
    with op.batch_alter_table("leasehold_workers") as batch:
        batch.drop_column("handlers")
