"""Schema upgrades of the SQL store with Alembic (``flask --app wsgi db upgrade``).

Alembic keeps Leasehold's revision in ``leasehold_alembic_version``, so an
application's own Alembic history (``alembic_version``) can share the
database. Releases up to revision 0001 kept it in ``alembic_version``; an
upgrade moves it under one rule (``adopt_legacy_version_table``): when
``leasehold_alembic_version`` is absent, ``alembic_version`` holds exactly one
row, that row is a revision Leasehold kept there (``0001``), and the 0001
tables are there with their columns (``jobs``, ``job_events``,
``recovery_runs``), then ``leasehold_alembic_version`` is created with that
revision and ``alembic_version`` is dropped. In every other case
``alembic_version`` is an application's and is never read again nor changed.

The whole upgrade (schema creation, the version table's move, every
revision) is one transaction on both engines, serialised against concurrent
upgrades (PostgreSQL: an advisory lock; SQLite: ``BEGIN IMMEDIATE``).
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection, Inspector

from store.errors import SchemaUpgradeFailed, ValidationError
from store.sql.engine import PG_SCHEMA_ENV, make_engines
from store.sql.revision import VERSION_TABLE

MIGRATIONS = Path(__file__).parent / "migrations"
#: Where releases up to 0001 kept it (Alembic's default name).
LEGACY_VERSION_TABLE = "alembic_version"
#: Leasehold revisions ever kept in LEGACY_VERSION_TABLE.
LEGACY_REVISIONS = frozenset({"0001"})
#: Tables of revision 0001 and columns of theirs that together identify its schema.
LEGACY_TABLES = {
    "jobs": {"id", "status", "due_at", "lease_token", "lease_expirations", "idempotency_key"},
    "job_events": {"id", "job_id", "kind", "from_status", "to_status", "token"},
    "recovery_runs": {"id", "owner", "trigger", "recovered", "failed", "duration_ms"},
}
#: Key of the PostgreSQL advisory lock held by an upgrade's transaction.
UPGRADE_LOCK_KEY = 0x1EA5E401D


def alembic_config(url: str, pg_schema: str | None = None) -> Config:
    """An Alembic Config for ``url`` using this package's migrations (no alembic.ini).

    ``pg_schema`` goes to ``env.py`` as given: the PostgreSQL schema, None for
    LEASEHOLD_PG_SCHEMA (``resolve_pg_schema``); SQLite ignores it."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes["pg_schema"] = pg_schema
    return cfg


def migrate(url: str, revision: str = "head", pg_schema: str | None = None) -> None:
    """Upgrade the database at ``url`` to ``revision`` (creating the SQLite file's
    folder, and on PostgreSQL the schema ``pg_schema``, default LEASEHOLD_PG_SCHEMA).

    Raises ValidationError for a bad URL or schema name before connecting."""
    engines = make_engines(url, pg_schema=pg_schema)  # validates; creates the folder
    for engine in {engines.write, engines.read, engines.single}:
        engine.dispose()
    command.upgrade(alembic_config(url, pg_schema), revision)


def prepare(connection: Connection, pg_schema: str | None) -> None:
    """Run by ``env.py`` in the upgrade's transaction, before any revision:
    lock out concurrent upgrades, create the PostgreSQL schema if missing,
    then move a 0001 database's version table (``adopt_legacy_version_table``).

    Raises ValidationError when ``pg_schema`` is new but the 0001 tables sit in
    ``public``: upgrading would leave them behind in an empty schema."""
    if connection.dialect.name == "postgresql":
        connection.execute(sa.select(sa.func.pg_advisory_xact_lock(UPGRADE_LOCK_KEY)))
    if connection.dialect.name == "postgresql" and pg_schema:
        exists = connection.execute(
            sa.text("SELECT 1 FROM pg_namespace WHERE nspname = :s"), {"s": pg_schema}
        ).first()
        if exists is None:
            connection.exec_driver_sql(f"CREATE SCHEMA {pg_schema}")  # validated identifier
        inspector = sa.inspect(connection)
        if not inspector.has_table(VERSION_TABLE) and _holds_legacy(connection, inspector, "public"):
            raise ValidationError(
                PG_SCHEMA_ENV,
                f"Leasehold's 0001 tables are in schema public, not {pg_schema}: upgrade them "
                f"without {PG_SCHEMA_ENV}, then move every leasehold_ table and "
                f"{VERSION_TABLE} with ALTER TABLE ... SET SCHEMA {pg_schema}",
            )
    adopt_legacy_version_table(connection)


def adopt_legacy_version_table(connection: Connection) -> bool:
    """Move Leasehold's revision from ``alembic_version`` to
    ``leasehold_alembic_version`` under the module's rule; True when moved.

    Looks only where the connection's unqualified names resolve (the
    PostgreSQL search_path). Not atomic by itself: run it in the upgrade's
    transaction."""
    inspector = sa.inspect(connection)
    if inspector.has_table(VERSION_TABLE) or not _holds_legacy(connection, inspector, None):
        return False
    [revision] = connection.execute(sa.text(f"SELECT version_num FROM {LEGACY_VERSION_TABLE}")).scalars()
    version = version_table()
    version.create(connection)
    connection.execute(version.insert().values(version_num=revision))
    connection.exec_driver_sql(f"DROP TABLE {LEGACY_VERSION_TABLE}")
    return True


def version_table() -> sa.Table:
    """``leasehold_alembic_version`` as Alembic itself declares a version table."""
    return sa.Table(
        VERSION_TABLE,
        sa.MetaData(),
        sa.Column("version_num", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("version_num", name=f"{VERSION_TABLE}_pkc"),
    )


def _holds_legacy(connection: Connection, inspector: Inspector, schema: str | None) -> bool:
    """Whether ``schema`` (None: the default) has a 0001 database's tables
    and an ``alembic_version`` holding one Leasehold revision alone."""
    if not inspector.has_table(LEGACY_VERSION_TABLE, schema=schema):
        return False
    for table, columns in LEGACY_TABLES.items():
        if not inspector.has_table(table, schema=schema):
            return False
        if not columns <= {c["name"] for c in inspector.get_columns(table, schema=schema)}:
            return False
    legacy = sa.table(LEGACY_VERSION_TABLE, sa.column("version_num"), schema=schema)
    revisions = connection.execute(sa.select(legacy.c.version_num)).scalars().all()
    return len(revisions) == 1 and revisions[0] in LEGACY_REVISIONS


def upgrade_sql(url: str) -> str:
    """Migrate the store at ``url`` to head (``migrate``) and return the one
    line saying what was done. Raises SchemaUpgradeFailed (one line)."""
    from sqlalchemy.exc import SQLAlchemyError

    from store.sql.revision import current_revision, head_revision

    try:
        engines = make_engines(url, pool_size=1)
        try:
            before = current_revision(engines.read)
        finally:
            for engine in {engines.write, engines.read, engines.single}:
                engine.dispose()
        migrate(url)
    except SQLAlchemyError as exc:
        reason = " ".join(str(getattr(exc, "orig", None) or exc).split())
        raise SchemaUpgradeFailed(f"schema upgrade failed: {reason}") from None
    head = head_revision()
    if before is None:
        return f"created the schema at revision {head}"
    if before != head:
        return f"upgraded the schema from revision {before} to {head}"
    return f"the schema is already at revision {head}"
