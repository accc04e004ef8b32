"""Fresh, empty stores for the benchmarks, and the servers' versions.

Each ``FreshStores.fresh(kind)`` is a new store removed afterwards: SQLite a
copy of a migrated file in a folder of its own, PostgreSQL a database cloned
from a migrated template (one template per ``FreshStores``, dropped by
``close``), Redis a new key prefix. Servers come from LEASEHOLD_TEST_PG_URL /
LEASEHOLD_TEST_REDIS_URL (defaults: the local servers).
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from tests.backends import (
    PG_ADMIN_URL,
    REDIS_URL,
    PgTemplate,
    SqliteTemplate,
    _pg_dsn,
    delete_redis_prefix,
    redis_url_with_prefix,
)

KINDS = ("sqlite", "postgresql", "redis")


class FreshStores:
    """Hands out empty stores of each kind; templates are made on first use."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self._pg: PgTemplate | None = None
        self._sqlite: SqliteTemplate | None = None

    @contextmanager
    def fresh(self, kind: str) -> Iterator[str]:
        """The URL of a new, empty, migrated store of ``kind``; removed on exit."""
        if kind == "sqlite":
            if self._sqlite is None:
                folder = Path(tempfile.mkdtemp(prefix="template-", dir=self.tmp))
                self._sqlite = SqliteTemplate(folder)
            folder = Path(tempfile.mkdtemp(prefix="store-", dir=self.tmp))
            try:
                yield self._sqlite.clone(folder)
            finally:
                for path in folder.iterdir():
                    path.unlink()
                folder.rmdir()
        elif kind == "postgresql":
            if self._pg is None:
                self._pg = PgTemplate()
            url, drop = self._pg.clone()
            try:
                yield url
            finally:
                drop()
        elif kind == "redis":
            url, prefix = redis_url_with_prefix()
            try:
                yield url
            finally:
                delete_redis_prefix(url, prefix)
        else:
            raise ValueError(f"unknown store {kind!r}; pick from {', '.join(KINDS)}")

    def close(self) -> None:
        """Drop the PostgreSQL template (the SQLite one lives in ``tmp``)."""
        if self._pg is not None:
            self._pg.drop()
            self._pg = None


def server_versions(kinds: list[str]) -> dict[str, str]:
    """``{kind: "name version (where)"}`` of the servers the run uses."""
    out = {}
    if "sqlite" in kinds:
        out["sqlite"] = f"SQLite {sqlite3.sqlite_version} (temporary files)"
    if "postgresql" in kinds:
        with psycopg.connect(_pg_dsn(PG_ADMIN_URL)) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]
        host = PG_ADMIN_URL.split("@")[-1].rsplit("/", 1)[0]
        out["postgresql"] = f"PostgreSQL {version.split()[0]} ({host})"
    if "redis" in kinds:
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        try:
            version = client.info("server")["redis_version"]
        finally:
            client.close()
        out["redis"] = f"Redis {version} ({REDIS_URL.split('//')[-1]})"
    return out
