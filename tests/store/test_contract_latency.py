"""Contract: queue latency (the age of each queue's oldest Queued job) on
every store, by the store's clock."""

from __future__ import annotations

import pytest

from store.base import JobStore
from store.latency import queue_latency


def test_latency_is_the_age_of_the_oldest_queued_job(store: JobStore) -> None:
    assert queue_latency(store) == {}
    old = store.enqueue("t", queue="a")
    store.clock_offset_s += 40
    store.enqueue("t", queue="a", priority=9)  # newer, claimed first: the oldest still counts
    store.enqueue("t", queue="b")
    store.enqueue("t", queue="c", delay_s=3600)  # Scheduled, not due: waits for nobody
    store.clock_offset_s += 5
    latency = queue_latency(store)
    assert latency["a"] == pytest.approx(45, abs=1) and latency["b"] == pytest.approx(5, abs=1)
    assert latency["c"] == 0.0
    claimed = store.claim("w", ["a"], 1)
    assert [j.id for j in claimed] != [old.id]  # priority 9 first
    assert queue_latency(store)["a"] == pytest.approx(45, abs=1)
    store.claim("w", ["a"], 1)
    assert queue_latency(store)["a"] == 0.0  # nothing waiting


def test_a_paused_queues_latency_grows(store: JobStore) -> None:
    store.enqueue("t", queue="mail")
    store.pause_queue("mail", actor="operator:ann")
    first = queue_latency(store)["mail"]
    store.clock_offset_s += 30
    assert store.claim("w", ["mail"], 1) == []
    assert queue_latency(store)["mail"] == pytest.approx(first + 30, abs=1)
