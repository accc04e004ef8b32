"""The SQL store (SQLite and PostgreSQL)."""

from __future__ import annotations


def migrate(url: str, revision: str = "head", pg_schema: str | None = None) -> None:
    """Upgrade the schema of ``url`` to ``revision`` (``store.sql.upgrade``);
    on PostgreSQL in the schema ``pg_schema`` (None: ``LEASEHOLD_PG_SCHEMA``;
    ``""``: the server's search_path), created if missing.

    Alembic is imported here, on first use, not with the package: a worker
    process never needs it (it costs ~20 MB of memory)."""
    from store.sql.upgrade import migrate as upgrade

    upgrade(url, revision, pg_schema)


__all__ = ["migrate"]
