"""The SQL stores' claim and the names of the limited queues: a store handle
keeps them for LIMITED_CACHE_S (store/sql/flow.py ``_limited_queues``), so a
claim that finds fewer jobs than it wants costs no second read, and limits
another process sets are still never exceeded and are served within that
time."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from store import open_store
from store.flow_rules import QueueLimits
from store.sql.flow import LIMITED_CACHE_S
from tests.backends import StoreHandle
from tests.conftest import handle_fixture
from tests.workers.procs import wait_until

handle = handle_fixture(["sqlite", "postgresql"])


@pytest.fixture
def limited_reads() -> Iterator[list[str]]:
    """The reads of the limited queues' names while the test runs."""
    found: list[str] = []

    def check(conn, cursor, statement, parameters, context, executemany) -> None:
        text = " ".join(statement.split())
        if text.startswith("SELECT leasehold_queues.name FROM leasehold_queues WHERE"):
            found.append(text)

    event.listen(Engine, "before_cursor_execute", check)
    yield found
    event.remove(Engine, "before_cursor_execute", check)


def test_claims_short_of_jobs_read_the_limited_queues_once_a_while(
    handle: StoreHandle, limited_reads: list[str]
) -> None:
    store = handle.store
    started = time.monotonic()
    for _ in range(5):
        store.enqueue("t")
        assert len(store.claim("w", ["default", "other"], 8)) == 1
    allowed = 1 + int((time.monotonic() - started) / LIMITED_CACHE_S)
    assert 1 <= len(limited_reads) <= allowed


def test_limits_another_handle_sets_are_kept_and_served(handle: StoreHandle) -> None:
    store = handle.store
    assert store.claim("w", ["lim"], 8) == []  # this handle now holds "no queue is limited"
    with open_store(handle.url) as other:
        other.set_queue_limits("lim", QueueLimits(concurrency=1))
        jobs = [other.enqueue("t", {"i": i}, queue="lim") for i in range(3)]
    claimed = wait_until(lambda: store.claim("w", ["lim"], 8), timeout=LIMITED_CACHE_S + 30)
    assert len(claimed) == 1 and claimed[0].id in {j.id for j in jobs}  # never past the limit
    assert store.claim("w", ["lim"], 8) == []
    store.complete(claimed[0].id, claimed[0].lease_token, None)
    assert len(store.claim("w", ["lim"], 8)) == 1
