"""Which Alembic revision an SQL store's schema is at, and which one this
release expects, read without importing Alembic (a worker never loads it).

The expected revision is the head of ``migrations/versions``: the one
revision no other names as its ``down_revision``, read from the files'
``revision = "…"`` and ``down_revision = "…"`` lines.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from store.errors import StoreUnavailable

#: Where Alembic keeps Leasehold's revision.
VERSION_TABLE = "leasehold_alembic_version"
VERSIONS = Path(__file__).parent / "migrations" / "versions"
_ASSIGNMENT = re.compile(r"^(revision|down_revision)\s*(?::[^=]*)?=\s*(None|[\"']([^\"']+)[\"'])", re.M)


@functools.cache
def head_revision() -> str:
    """The revision of the newest migration. Raises RuntimeError when the
    migrations do not form one line (no head, or several)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in VERSIONS.glob("*.py"):
        found = dict((m.group(1), m.group(3)) for m in _ASSIGNMENT.finditer(path.read_text()))
        if found.get("revision"):
            revisions.add(found["revision"])
            if found.get("down_revision"):
                parents.add(found["down_revision"])
    heads = sorted(revisions - parents)
    if len(heads) != 1:
        raise RuntimeError(f"the migrations have {len(heads)} heads: {heads}")
    return heads[0]


def current_revision(engine: Engine) -> str | None:
    """The revision the database behind ``engine`` is at; None when it has no
    Leasehold version table (no schema). Connection errors propagate."""
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table(VERSION_TABLE):
            return None
        try:
            rows = conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
        except DBAPIError:  # a table of that name that is not Alembic's
            return None
    return rows[0] if len(rows) == 1 else None


def schema_revision(engine: Engine) -> tuple[str | None, str]:
    """``(found, expected)`` Alembic revisions of the store on ``engine``.
    Raises StoreUnavailable when it cannot be reached."""
    try:
        return current_revision(engine), head_revision()
    except DBAPIError as exc:
        raise StoreUnavailable(f"SQL store unavailable: {exc.orig}") from exc
