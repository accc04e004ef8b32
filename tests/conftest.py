"""Shared fixtures: a fresh store per test on every backend of the contract."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from store import StoreSettings, open_store
from tests.backends import (
    BACKENDS,
    PgTemplate,
    SqliteTemplate,
    StoreHandle,
    delete_redis_prefix,
    redis_url_with_prefix,
)


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
    raise ValueError(f"unknown backend {backend}")


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
