"""Fixtures of the worker tests: fast retries in the test's own store, and a
``spawn`` that starts real worker processes and always kills them (their
logs are attached to a failing test's report)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from store import StoreSettings
from store.lifecycle import RetryPolicy
from tests.backends import StoreHandle
from tests.workers.procs import Spawner


@pytest.fixture
def store_settings() -> StoreSettings:
    """The test process's store retries as fast as the workers it starts."""
    return StoreSettings(lease_ttl_s=1.0, retry=RetryPolicy(base_s=0.05, max_delay_s=1.0))


@pytest.fixture
def spawn(handle: StoreHandle, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Spawner]:
    spawner = Spawner(handle.url, tmp_path)
    request.node.leasehold_spawner = spawner
    yield spawner
    spawner.cleanup()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    report = yield
    spawner = getattr(item, "leasehold_spawner", None)
    if spawner is not None and report.when == "call" and report.failed:
        report.sections.append(("worker logs", spawner.logs()))
    return report
