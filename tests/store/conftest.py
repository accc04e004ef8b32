"""Fixtures of the store tests beside the every-backend ``store`` (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from store import open_store
from store.redis.store import RedisStore
from store.sql.store import SqlStore
from tests.backends import delete_redis_prefix, redis_url_with_prefix


@pytest.fixture
def redis_store() -> Iterator[RedisStore]:
    """A Redis store under a fresh key prefix, removed afterwards (modules
    that use it skip themselves when Redis is not a test backend)."""
    url, prefix = redis_url_with_prefix()
    store = open_store(url)
    assert isinstance(store, RedisStore)
    yield store
    store.close()
    delete_redis_prefix(url, prefix)


@pytest.fixture
def sqlite_store(request: pytest.FixtureRequest, tmp_path: Path, store_settings) -> Iterator[SqlStore]:
    """A SQLite store in a copy of the migrated template, for the
    SQLite-only store tests."""
    url = request.getfixturevalue("sqlite_template").clone(tmp_path)
    store = open_store(url, store_settings)
    assert isinstance(store, SqlStore)
    yield store
    store.close()


@pytest.fixture
def url_and_store() -> Iterator[tuple[str, RedisStore]]:
    url, prefix = redis_url_with_prefix()
    store = open_store(url)
    assert isinstance(store, RedisStore)
    yield url, store
    store.close()
    delete_redis_prefix(url, prefix)
