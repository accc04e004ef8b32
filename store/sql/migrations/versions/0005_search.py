"""Search by payload field on PostgreSQL: a GIN index (jsonb_path_ops) on
leasehold_jobs.payload answers ``payload @> '{"key": value}'``. SQLite gets
no index (its search scans a bounded window, store/search.py).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.create_index(
            "leasehold_ix_jobs_payload",
            "leasehold_jobs",
            ["payload"],
            postgresql_using="gin",
            postgresql_ops={"payload": "jsonb_path_ops"},
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("leasehold_ix_jobs_payload", "leasehold_jobs")
