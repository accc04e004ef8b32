"""Fixtures of the store tests beside the every-backend ``store`` (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store import open_store
from store.redis.store import RedisStore
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
