"""Bookkeeping without a write another implies: an event of a history kind
that names its queue is counted in ``q:<kind>:<queue>`` alone, and the
kind's total is read as ``e:<kind>`` plus the sum of its queues'
(store/counters.py ``derived_event_totals``). Upgrading moves what the
queues' totals already say out of ``e:<kind>`` (shard 0 takes the
difference), so every total reads the same before and after; the downgrade
adds it back. No table or column changes.

Revision ID: 0011
Revises: 0009
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

#: store.counters.HISTORY_KINDS as this revision found it (a migration never
#: follows the code's later lists).
HISTORY_KINDS = ("completed", "enqueued", "failed", "lease_expired", "retry_scheduled")


def _move(sign: str) -> None:
    """Add ``sign`` times the sum of each kind's ``q:<kind>:*`` rows to its
    ``e:<kind>`` row of shard 0 (created when missing; none for a kind no
    queue has counted)."""
    for kind in HISTORY_KINDS:
        prefix = f"q:{kind}:"
        op.execute(
            "INSERT INTO leasehold_counters (key, shard, n) "
            f"SELECT 'e:{kind}', 0, {sign}SUM(n) FROM leasehold_counters "
            f"WHERE substr(key, 1, {len(prefix)}) = '{prefix}' HAVING COUNT(*) > 0 "
            "ON CONFLICT (key, shard) DO UPDATE SET n = leasehold_counters.n + excluded.n"
        )


def upgrade() -> None:
    _move("-")


def downgrade() -> None:
    _move("")
