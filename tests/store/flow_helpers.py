"""The one skip of flow-control contract tests on a store that has not built
flow control yet (the Redis store: its functions library will decide limits in
its claim and dependencies in its ack). Remove the skip here when it lands."""

from __future__ import annotations

import pytest

from store.base import JobStore

REDIS_PENDING = (
    "Redis: limits and dependencies are decided in the Functions library's claim and ack, not built yet"
)


def needs_flow(store: JobStore) -> None:
    """Skip the calling test on a store without flow control (only Redis)."""
    if not getattr(store, "supports_flow", False):
        pytest.skip(REDIS_PENDING)
