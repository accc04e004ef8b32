"""The SQL store (SQLite and PostgreSQL)."""

from store.sql.migrate import migrate

__all__ = ["migrate"]
