"""The one rule for a PostgreSQL schema name (``LEASEHOLD_PG_SCHEMA``), with no
SQLAlchemy import, so the settings model checks it at start through the
store's door (``store.sql.engine`` applies it when it connects)."""

from __future__ import annotations

import os
import re

from store.errors import ValidationError

#: The environment variable naming the PostgreSQL schema of the tables (optional).
PG_SCHEMA_ENV = "LEASEHOLD_PG_SCHEMA"
#: A schema name we accept: a lowercase unquoted PostgreSQL identifier (at most 63 bytes).
_PG_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def resolve_pg_schema(value: str | None = None) -> str | None:
    """The PostgreSQL schema to use: ``value``, or ``LEASEHOLD_PG_SCHEMA`` when
    ``value`` is None; None when that is empty (the server's search_path).

    Raises ValidationError (naming LEASEHOLD_PG_SCHEMA) unless the name is a
    lowercase identifier (letters, digits, ``_``) not starting with ``pg_``,
    so it can go into ``search_path`` and DDL without quoting."""
    name = os.environ.get(PG_SCHEMA_ENV, "") if value is None else value
    if not name:
        return None
    if not _PG_SCHEMA_NAME.fullmatch(name) or name.startswith("pg_"):
        raise ValidationError(
            PG_SCHEMA_ENV,
            f"{name!r} is not a schema name we accept: lowercase letters, digits and _, "
            "at most 63, not starting with a digit or pg_",
        )
    return name
