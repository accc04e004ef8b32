"""PostgreSQL: leasehold_jobs keeps a fifth of each heap page free (fillfactor 80).

A claim, an ack or a retry changes ``status`` (an indexed column), so the new
row version is never a HOT update; PostgreSQL puts it on the old version's page
when that page has room, else on any page the free space map offers. With the
default fillfactor of 100 the pages of new jobs fill up, and with a million
finished jobs in the table the free space map offers old pages: each claim and
ack then wrote its row into a cold page (read from disk or the OS cache, and a
full-page image in the WAL at its first change after a checkpoint). Measured
(100 enqueues and 15 claims and acks of 8 jobs after 1,000,000 finished ones,
pg_statio and pg_stat_wal): heap pages read 340 -> 100, full-page images 367
-> 120, WAL 3.5 -> 1.3 MB; the empty store was 6 pages and 0.6 MB either way.
``make bench-scale`` (PostgreSQL, 1,000,000 finished against empty; two runs an
hour apart on one noisy machine, before -> after):
single enqueue 0.76x -> 0.91x, bulk 0.73x -> 0.84x, drain with 2 processes 0.67x ->
0.77x. The cost: a queued job takes 918 -> 970 bytes (tables and indexes), a
completed one 2,835 -> 2,850. New pages get the setting; rows already written
stay where they are. SQLite has no fillfactor.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

#: Percent of each heap page of leasehold_jobs that inserts may fill (store/sql/schema.py).
JOBS_FILLFACTOR = 80


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE leasehold_jobs SET (fillfactor = {JOBS_FILLFACTOR})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE leasehold_jobs RESET (fillfactor)")
