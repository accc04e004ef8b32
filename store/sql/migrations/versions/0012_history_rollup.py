"""History written per minute only: the hour buckets are rolled up from the
minute buckets by trim_history once an hour has ended, and summed from them
at read time after the roll-up mark (store/counters.py, "roll-up"; the mark
is the counter row ``r:<width>`` of shard 0). Upgrading drops each wider
width's buckets from the current one on (the minute buckets hold the same
counts) and sets its mark to the current bucket, the buckets before it
holding their sums; a store with no wider bucket gets no mark (every wide
bucket is summed at read time until the first trim). The downgrade rebuilds
the wider buckets from the mark on (or all of them, with no mark) from the
minute buckets and drops the marks. No table or column changes.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

#: store.counters.HISTORY_WIDTHS as this revision found it: the narrowest
#: width, then the wider ones (a migration never follows the code's later lists).
NARROW = 60
WIDER = (3600,)
#: The database's clock, epoch seconds (store/sql/statements.py ``store_now``).
NOW = {
    "postgresql": "date_part('epoch', statement_timestamp())",
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
}


def _floor(dialect: str, expr: str, width: int) -> str:
    """``floor(expr / width) * width`` (SQLite: CAST truncates, floor after 1970)."""
    if dialect == "postgresql":
        return f"(floor(({expr}) / {width}) * {width})"
    return f"(CAST(({expr}) / {width} AS INTEGER) * {width})"


def upgrade() -> None:
    bind = op.get_bind()
    dialect = bind.dialect.name
    for width in WIDER:
        kept = bind.execute(
            text(f"SELECT count(*) FROM leasehold_history WHERE width = {width}")
        ).scalar_one()
        if not kept:
            continue
        current = bind.execute(text(f"SELECT {_floor(dialect, NOW[dialect], width)}")).scalar_one()
        op.execute(f"DELETE FROM leasehold_history WHERE width = {width} AND bucket >= {int(current)}")
        op.execute(
            f"INSERT INTO leasehold_counters (key, shard, n) VALUES ('r:{width}', 0, {int(current)}) "
            "ON CONFLICT (key, shard) DO UPDATE SET n = excluded.n"
        )


def downgrade() -> None:
    bind = op.get_bind()
    dialect = bind.dialect.name
    for width in WIDER:
        key = f"r:{width}"
        mark = bind.execute(
            text("SELECT n FROM leasehold_counters WHERE key = :k AND shard = 0"), {"k": key}
        ).scalar_one_or_none()
        since = f" AND bucket >= {int(mark)}" if mark is not None else ""
        op.execute(
            "INSERT INTO leasehold_history (width, bucket, queue, kind, shard, n) "
            f"SELECT {width}, {_floor(dialect, 'bucket', width)}, queue, kind, 0, SUM(n) "
            f"FROM leasehold_history WHERE width = {NARROW}{since} GROUP BY 2, 3, 4 "
            "ON CONFLICT (width, bucket, queue, kind, shard) "
            "DO UPDATE SET n = leasehold_history.n + excluded.n"
        )
        op.execute(f"DELETE FROM leasehold_counters WHERE key = '{key}'")
