"""The SQL store (SQLite and PostgreSQL)."""

from __future__ import annotations


def migrate(url: str, revision: str = "head") -> None:
    """Upgrade the schema of ``url`` to ``revision`` (``store.sql.upgrade``).

    Alembic is imported here, on first use, not with the package: a worker
    process never needs it (it costs ~20 MB of memory)."""
    from store.sql.upgrade import migrate as upgrade

    upgrade(url, revision)


__all__ = ["migrate"]
