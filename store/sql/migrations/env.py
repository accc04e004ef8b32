"""Alembic environment for the SQL store; the URL and the PostgreSQL schema
come from the Config (``store.sql.upgrade.alembic_config``).

Online, the store's own write engine runs the upgrade (SQLite: WAL and
``BEGIN IMMEDIATE``; PostgreSQL: the schema's search_path) as one transaction:
``transactional_ddl`` is on for SQLite too, so a failed revision leaves the
database as it was.
"""

from __future__ import annotations

from alembic import context

from store.sql.engine import make_engines, resolve_pg_schema
from store.sql.indexes import metadata
from store.sql.upgrade import VERSION_TABLE, prepare

config = context.config


def run_migrations_online() -> None:
    pg_schema = config.attributes.get("pg_schema")  # None: LEASEHOLD_PG_SCHEMA
    engines = make_engines(config.get_main_option("sqlalchemy.url"), pool_size=1, pg_schema=pg_schema)
    write, dialect = engines.write, engines.dialect
    try:
        with write.connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=metadata,
                version_table=VERSION_TABLE,
                transactional_ddl=True,
                render_as_batch=dialect == "sqlite",
            )
            with context.begin_transaction():
                prepare(connection, resolve_pg_schema(pg_schema) if dialect == "postgresql" else None)
                context.run_migrations()
    finally:
        for engine in {engines.write, engines.read, engines.single}:
            engine.dispose()


if context.is_offline_mode():
    context.configure(
        url=config.get_main_option("sqlalchemy.url"), target_metadata=metadata, version_table=VERSION_TABLE
    )
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
