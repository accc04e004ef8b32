"""Prefix every table, index and named constraint with ``leasehold_`` (data kept).

Only a database whose 0001 ran in a release before this one has the
unprefixed names (``leasehold_jobs`` absent); since this release 0001 creates
the prefixed ones and there is nothing to do.

PostgreSQL renames in place (tables, indexes, primary keys, the event id
sequence): catalogue changes only, no row is copied, but each rename takes an
ACCESS EXCLUSIVE lock, so stop the workers first. SQLite renames the tables
in place (their automatic primary-key indexes follow) and, having no ALTER
INDEX, drops and creates each index under its new name: that reads the whole
table once per index. Both run in one transaction (``env.py``).

The version table moves from ``alembic_version`` to
``leasehold_alembic_version`` before this runs (``store.sql.upgrade``).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

from typing import NamedTuple

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

PREFIX = "leasehold_"
TABLES = ("jobs", "job_events", "counters", "workers", "locks", "recovery_runs")
WAITING = sa.text("status IN (100, 200)")
RUNNING = sa.text("status = 300")
AUDIT = sa.text("actor LIKE 'operator:%'")


class _Index(NamedTuple):
    """An index as 0001 created it (SQLite re-creates it under the other name)."""

    name: str
    table: str
    columns: list[str | sa.TextClause]
    unique: bool = False
    where: sa.TextClause | None = None


INDEXES = (
    _Index("ix_jobs_ready", "jobs", ["queue", sa.text("priority DESC"), "due_at", "id"], where=WAITING),
    _Index("ix_jobs_lease", "jobs", ["lease_expires_at"], where=RUNNING),
    _Index("ix_jobs_status_updated", "jobs", ["status", "last_updated_at", "id"]),
    _Index("ix_jobs_queue_updated", "jobs", ["queue", "last_updated_at", "id"]),
    _Index("ix_jobs_name_updated", "jobs", ["name", "last_updated_at", "id"]),
    _Index("ix_jobs_updated", "jobs", ["last_updated_at", "id"]),
    _Index("ux_jobs_idempotency_key", "jobs", ["idempotency_key"], unique=True),
    _Index("ix_job_events_job", "job_events", ["job_id", "id"]),
    _Index("ix_job_events_audit", "job_events", ["id"], where=AUDIT),
    _Index("ix_recovery_runs_started", "recovery_runs", ["started_at"]),
)
#: PostgreSQL: (table, constraint) of each primary key (its index has the same name).
PG_PRIMARY_KEYS = (
    ("jobs", "jobs_pkey"),
    ("job_events", "job_events_pkey"),
    ("counters", "pk_counters"),
    ("workers", "workers_pkey"),
    ("locks", "locks_pkey"),
    ("recovery_runs", "recovery_runs_pkey"),
)
#: PostgreSQL: sequences that BIGSERIAL columns own.
PG_SEQUENCES = ("job_events_id_seq",)


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table(PREFIX + "jobs"):
        return
    for table in TABLES:
        op.rename_table(table, PREFIX + table)
    if op.get_bind().dialect.name == "postgresql":
        for ix in INDEXES:
            op.execute(f"ALTER INDEX {ix.name} RENAME TO {PREFIX}{ix.name}")
        for table, pk in PG_PRIMARY_KEYS:
            op.execute(f"ALTER TABLE {PREFIX}{table} RENAME CONSTRAINT {pk} TO {PREFIX}{pk}")
        for seq in PG_SEQUENCES:
            op.execute(f"ALTER SEQUENCE {seq} RENAME TO {PREFIX}{seq}")
        return
    for ix in INDEXES:
        op.drop_index(ix.name, table_name=PREFIX + ix.table)
        op.create_index(
            PREFIX + ix.name,
            PREFIX + ix.table,
            ix.columns,
            unique=ix.unique,
            postgresql_where=ix.where,
            sqlite_where=ix.where,
        )


def downgrade() -> None:
    """Nothing: revision 0001 now has the prefixed names too."""
