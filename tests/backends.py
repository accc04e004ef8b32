"""Throwaway stores for the tests, one factory per backend.

Each factory returns a StoreHandle with a fresh, empty, migrated store and the
URL that other processes open it with. Nothing here touches data it did not
create: PostgreSQL tests get their own database cloned from a template made
for this run; Redis tests get their own key prefix, deleted afterwards;
SQLite tests get a file in pytest's tmp_path.

Servers come from LEASEHOLD_TEST_PG_URL and LEASEHOLD_TEST_REDIS_URL (set by
``scripts/services.sh``; defaults are the local servers on 127.0.0.1).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
from sqlalchemy.engine import make_url

from store import JobStore, StoreSettings, open_store
from store.sql import migrate

PG_ADMIN_URL = os.environ.get(
    "LEASEHOLD_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
REDIS_URL = os.environ.get("LEASEHOLD_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
#: Backends the contract suite runs on (comma-separated). ``redis-cluster``
#: (a throwaway 3-master cluster, tests/redis_cluster.py) and the sharded
#: stores (``shards=3``, store/redis/shards/) on one server
#: (``redis-shards``) and on that cluster (``redis-cluster-shards``) run the
#: contract suite only (tests/store/test_contract_*.py, CONTRACT_ONLY); every
#: other test that takes the ``store`` fixture runs on the rest.
BACKENDS = [
    b
    for b in os.environ.get(
        "LEASEHOLD_TEST_BACKENDS", "sqlite,postgresql,redis,redis-cluster,redis-shards,redis-cluster-shards"
    ).split(",")
    if b
]
#: The backends served by the Redis store (layout, notices and limits alike).
REDIS_BACKENDS = ("redis", "redis-cluster", "redis-shards", "redis-cluster-shards")
#: The backends that run the contract suite alone.
CONTRACT_ONLY = ("redis-cluster", "redis-shards", "redis-cluster-shards")
#: Shards of the sharded test backends.
TEST_SHARDS = 3


@dataclass
class StoreHandle:
    """A fresh store, the URL to open it again elsewhere, and its clean-up."""

    backend: str
    url: str
    store: JobStore
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    def open(self, settings: StoreSettings | None = None) -> JobStore:
        """Another handle on the same data (as another process would have)."""
        other = open_store(self.url, settings or self.store.settings)
        self.cleanups.append(other.close)
        return other

    def close(self) -> None:
        self.store.close()
        for fn in reversed(self.cleanups):
            fn()


def _pg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class PgTemplate:
    """A migrated template database for this test run, cloned per test."""

    def __init__(self) -> None:
        self.name = f"lh_tmpl_{uuid.uuid4().hex[:10]}"
        self._admin = _pg_dsn(PG_ADMIN_URL)
        self._sql(f'CREATE DATABASE "{self.name}"')
        migrate(self.url_for(self.name))

    def url_for(self, db: str) -> str:
        return make_url(PG_ADMIN_URL).set(database=db).render_as_string(hide_password=False)

    def _sql(self, statement: str) -> None:
        with psycopg.connect(self._admin, autocommit=True) as conn:
            conn.execute(statement)

    def clone(self) -> tuple[str, Callable[[], None]]:
        db = f"lh_t_{uuid.uuid4().hex[:12]}"
        self._sql(f'CREATE DATABASE "{db}" TEMPLATE "{self.name}"')
        return self.url_for(db), lambda: self._sql(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')

    def drop(self) -> None:
        self._sql(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def empty_pg_database() -> tuple[str, Callable[[], None]]:
    """A new empty database (no schema, unlike ``PgTemplate.clone``): its URL
    and the function that drops it."""
    db = f"lh_e_{uuid.uuid4().hex[:12]}"
    admin = _pg_dsn(PG_ADMIN_URL)

    def sql(statement: str) -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(statement)

    sql(f'CREATE DATABASE "{db}"')
    url = make_url(PG_ADMIN_URL).set(database=db).render_as_string(hide_password=False)
    return url, lambda: sql(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


class SqliteTemplate:
    """A migrated SQLite file, copied per test (faster than migrating each time)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "template.db"
        migrate(f"sqlite:///{self.path}")

    def clone(self, folder: Path) -> str:
        target = folder / "jobs.db"
        shutil.copyfile(self.path, target)
        return f"sqlite:///{target}"


def redis_url_with_prefix() -> tuple[str, str]:
    """REDIS_URL with a fresh ``prefix`` query parameter, and that prefix."""
    prefix = f"lh-test-{uuid.uuid4().hex[:10]}"
    sep = "&" if "?" in REDIS_URL else "?"
    return f"{REDIS_URL}{sep}prefix={quote(prefix)}", prefix


def delete_redis_prefix(url: str, prefix: str) -> None:
    """Delete every key of one test prefix (SCAN is fine here: tests only)."""
    import redis

    client = redis.Redis.from_url(url.split("?", 1)[0])
    try:
        keys = list(client.scan_iter(match=f"*{prefix}*", count=1000))
        for i in range(0, len(keys), 500):
            pipe = client.pipeline(transaction=False)  # one DEL a key: a sharded prefix spans slots
            for key in keys[i : i + 500]:
                pipe.delete(key)
            pipe.execute()
    finally:
        client.close()


def redis_engine(store: Any, *, queue: str | None = None, job_id: str | None = None) -> Any:
    """The RedisStore namespace holding ``queue``'s or ``job_id``'s keys
    (else the records'): ``store`` itself unless it is sharded (then the
    shard's, store/redis/shards/)."""
    if not hasattr(store, "shards"):
        return store
    if queue is not None:
        return store.of_queue(queue)
    if job_id is not None:
        return store.of_id(job_id)
    return store.records
