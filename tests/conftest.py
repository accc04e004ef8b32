"""Shared fixtures: a fresh store per test on every backend of the contract."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from store import StoreSettings, open_store
from tests.backends import (
    BACKENDS,
    CONTRACT_ONLY,
    TEST_SHARDS,
    PgTemplate,
    SqliteTemplate,
    StoreHandle,
    delete_redis_prefix,
    empty_pg_database,
    redis_url_with_prefix,
)
from tests.redis_cluster import Cluster
from tests.redis_cluster import available as cluster_available


def pytest_configure(config: pytest.Config) -> None:
    """Load the handler-testing plugin (workers.testing) unless its pytest11
    entry point already did (a checkout with the package's metadata on the path)."""
    import workers.testing

    if not config.pluginmanager.is_registered(workers.testing):
        config.pluginmanager.register(workers.testing, "leasehold")


@pytest.fixture(scope="session")
def pg_template() -> Iterator[PgTemplate]:
    template = PgTemplate()
    yield template
    template.drop()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> SqliteTemplate:
    return SqliteTemplate(tmp_path_factory.mktemp("sqlite-template"))


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A throwaway 3-master Redis Cluster for this test process (started
    the first time a test asks for it)."""
    if not cluster_available():
        pytest.skip("redis-server and redis-cli are needed for the Redis Cluster")
    cluster = Cluster(tmp_path_factory.mktemp("redis-cluster"))
    yield cluster
    cluster.stop()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The CONTRACT_ONLY backends (the cluster, the sharded stores) run the
    contract suite only (tests/store/test_contract_*.py): their other
    parametrisations are deselected."""
    keep, drop = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_cluster = callspec is not None and callspec.params.get("handle") in CONTRACT_ONLY
        contract = item.path.name.startswith("test_contract_")
        (drop if on_cluster and not contract else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def make_handle(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, settings: StoreSettings
) -> StoreHandle:
    """A fresh store on ``backend``; clean-up is registered on the handle."""
    if backend == "sqlite":
        url = request.getfixturevalue("sqlite_template").clone(tmp_path)
        return StoreHandle(backend, url, open_store(url, settings))
    if backend == "postgresql":
        url, drop = request.getfixturevalue("pg_template").clone()
        handle = StoreHandle(backend, url, open_store(url, settings))
        handle.cleanups.append(drop)
        return handle
    if backend == "redis":
        url, prefix = redis_url_with_prefix()
        handle = StoreHandle(backend, url, open_store(url, settings))
        handle.cleanups.append(lambda: delete_redis_prefix(url, prefix))
        return handle
    if backend == "redis-shards":
        url, prefix = redis_url_with_prefix()
        url = f"{url}&shards={TEST_SHARDS}"
        handle = StoreHandle(backend, url, open_store(url, settings))
        handle.cleanups.append(lambda: delete_redis_prefix(url, prefix))
        return handle
    if backend in ("redis-cluster", "redis-cluster-shards"):
        cluster: Cluster = request.getfixturevalue("redis_cluster")
        url, prefix = cluster.url_with_prefix()
        if backend == "redis-cluster-shards":
            url = f"{url}&shards={TEST_SHARDS}"
        handle = StoreHandle(backend, url, open_store(url, settings))
        handle.cleanups.append(lambda: cluster.delete_prefix(prefix))
        return handle
    raise ValueError(f"unknown backend {backend}")


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a new empty database (PostgreSQL: its own, dropped afterwards)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    url, drop = empty_pg_database()
    try:
        yield url
    finally:
        drop()


@pytest.fixture
def store_settings() -> StoreSettings:
    """Settings of the store under test; override in a module to change them."""
    return StoreSettings()


def handle_fixture(backends: list[str]):
    """A ``handle`` fixture parametrised over ``backends``: a fresh store per
    test, closed and cleaned up afterwards. A conftest can narrow the stores
    its folder runs on with ``handle = handle_fixture([...])``."""

    @pytest.fixture(params=backends, name="handle")
    def fixture(
        request: pytest.FixtureRequest, tmp_path: Path, store_settings: StoreSettings
    ) -> Iterator[StoreHandle]:
        h = make_handle(request.param, request, tmp_path, store_settings)
        yield h
        h.close()

    return fixture


handle = handle_fixture(BACKENDS)


@pytest.fixture
def store(handle: StoreHandle):
    return handle.store
