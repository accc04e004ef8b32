"""The Alembic migrations build exactly the schema the store's code declares."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from store.sql.schema import metadata
from store.sql.upgrade import VERSION_TABLE
from tests.backends import PgTemplate, SqliteTemplate


def _diff(url: str) -> list:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return compare_metadata(
                MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}), metadata
            )
    finally:
        engine.dispose()


def test_sqlite_migration_matches_schema(sqlite_template: SqliteTemplate) -> None:
    url = f"sqlite:///{sqlite_template.path}"
    # Alembic cannot reflect SQLite expression indexes ("priority DESC"): it reports
    # them as removed and added again. Compare those by their DDL instead.
    diff = [
        d
        for d in _diff(url)
        if not (d[0] in ("add_index", "remove_index") and d[1].name == "leasehold_ix_jobs_ready")
    ]
    assert diff == []
    engine = create_engine(url)
    with engine.connect() as conn:
        ddl = conn.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE name = 'leasehold_ix_jobs_ready'"
        ).scalar_one()
    engine.dispose()
    assert "priority DESC" in ddl and "WHERE status IN (100, 200)" in ddl


def test_postgresql_migration_matches_schema(pg_template: PgTemplate) -> None:
    assert _diff(pg_template.url_for(pg_template.name)) == []


def test_unknown_backend_is_refused() -> None:
    from store import open_store
    from store.errors import ValidationError

    with pytest.raises(ValidationError, match="unknown store URL scheme"):
        open_store("mysql://localhost/x")
