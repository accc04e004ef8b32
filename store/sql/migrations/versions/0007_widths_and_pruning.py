"""Columns as wide as what validation lets through, and an index for pruning
login failures.

* ``leasehold_operations.id`` 36 -> 100: a bulk operation's id is a UUID or
  the request's Idempotency-Key, 1-100 characters (``MAX_OPERATION_ID_LEN``).
* ``leasehold_unique_keys.key`` 200 -> 265: a default unique key is
  ``<name>:<sha256 hex>``, a 200-character name + 65 (``MAX_UNIQUE_KEY_LEN``).
* ``leasehold_recovery_runs.trigger`` 100 -> 200: an operator's run is
  triggered by ``operator:<name>#<8 hex>``, like the other actor columns (200).
* ``leasehold_ix_failures_window_end``: maintenance deletes the failure
  counters whose window has closed through it (no scan of the table).

PostgreSQL widens a varchar in place (no table rewrite); SQLite copies the
three small tables (batch mode) to change the declared type.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

#: (table, column, old width, new width)
WIDENED = (
    ("leasehold_operations", "id", 36, 100),
    ("leasehold_unique_keys", "key", 200, 265),
    ("leasehold_recovery_runs", "trigger", 100, 200),
)


def _alter(old_or_new: int) -> None:
    for table, column, old, new in WIDENED:
        before, after = (old, new) if old_or_new == 1 else (new, old)
        with op.batch_alter_table(table) as batch:
            batch.alter_column(
                column, existing_type=sa.String(before), type_=sa.String(after), existing_nullable=False
            )


def upgrade() -> None:
    _alter(1)
    op.create_index("leasehold_ix_failures_window_end", "leasehold_failures", ["window_end"])


def downgrade() -> None:
    op.drop_index("leasehold_ix_failures_window_end", "leasehold_failures")
    _alter(0)
