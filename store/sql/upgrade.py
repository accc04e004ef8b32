"""Schema upgrades of the SQL store with Alembic (``flask --app wsgi db upgrade``)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(url: str) -> Config:
    """An Alembic Config for ``url`` using this package's migrations (no alembic.ini)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def migrate(url: str, revision: str = "head") -> None:
    """Upgrade the database at ``url`` to ``revision`` (creating the SQLite file's folder)."""
    from store.sql.engine import make_engines

    write, read, _ = make_engines(url)  # validates the URL and creates the folder
    write.dispose()
    read.dispose()
    command.upgrade(alembic_config(url), revision)
