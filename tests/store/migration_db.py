"""What the migration tests read of a database (tests/store/test_migrations.py,
test_migrations_data.py): its schema against the store's metadata, its
tables, one value, rows."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from store.sql.indexes import declared_for, metadata
from store.sql.upgrade import VERSION_TABLE


def schema_diff(url: str) -> list:
    """Differences between the database's schema and the store's metadata.

    Alembic cannot reflect SQLite expression indexes ("priority DESC"): it
    reports leasehold_ix_jobs_ready as removed and added again, so that one is
    left out on SQLite (test_sqlite_migration_matches_schema reads its DDL).
    Indexes declared for one dialect only (``ddl_if``) are compared there only."""
    engine = create_engine(url)

    def include(item: object, name: str | None, kind: str, reflected: bool, compare_to: object) -> bool:
        return reflected or declared_for(item, engine.dialect.name)

    try:
        with engine.connect() as conn:
            opts = {"version_table": VERSION_TABLE, "include_object": include}
            diff = compare_metadata(MigrationContext.configure(conn, opts=opts), metadata)
    finally:
        engine.dispose()
    if not url.startswith("sqlite"):
        return diff
    return [
        d
        for d in diff
        if not (d[0] in ("add_index", "remove_index") and d[1].name == "leasehold_ix_jobs_ready")
    ]


def table_names(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def scalar(url: str, sql: str) -> object:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(text(sql)).scalar_one()
    finally:
        engine.dispose()


def fetch_rows(url: str, sql: str) -> list:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()
