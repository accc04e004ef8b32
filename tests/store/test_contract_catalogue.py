"""Contract: the handler catalogue derived from the worker registry on every
store: a worker's published handlers, kept while some live worker serves
them, gone when it leaves or falls silent."""

from __future__ import annotations

from store.base import JobStore
from store.catalogue import catalogue
from store.models import WorkerInfo, ts

SLOW = {
    "name": "slow",
    "queue": "slowq",
    "max_retries": 1,
    "timeout_s": 120.0,
    "lease_ttl_s": 30.0,
    "schedule": None,
    "max_snoozes": 100,
    "retry_base_s": 5.0,
    "retry_max_delay_s": 600.0,
    "retry_jitter": 0.1,
    "retry_on": ["TimeoutError", "app.errors.Busy"],
    "give_up_on": ["ValueError"],
}
NIGHTLY = {**SLOW, "name": "nightly", "queue": "default", "max_retries": None, "schedule": "0 3 * * *"}


def _beat(store: JobStore, worker_id: str, handlers: list[dict]) -> None:
    info = WorkerInfo(
        worker_id, "host", 1, ["default", "slowq"], 2, started_at=ts(store.now()), handlers=handlers
    )
    store.worker_heartbeat(info)


def test_a_workers_handlers_make_the_catalogue(store: JobStore) -> None:
    assert catalogue(store) == {}
    _beat(store, "w-1", [SLOW, NIGHTLY])
    [entry] = [w for w in store.workers() if w.id == "w-1"]
    assert entry.handlers == [SLOW, NIGHTLY]  # kept as published, on every store
    _beat(store, "w-1", [SLOW, NIGHTLY])  # a later beat keeps them
    found = catalogue(store)
    assert sorted(found) == ["nightly", "slow"]
    slow = found["slow"]
    assert (slow.queue, slow.max_retries, slow.timeout_s, slow.workers) == ("slowq", 1, 120.0, ("w-1",))
    assert found["nightly"].schedule == "0 3 * * *" and found["nightly"].max_retries is None
    policy = (slow.retry_base_s, slow.retry_max_delay_s, slow.retry_jitter, slow.retry_on, slow.give_up_on)
    assert policy == (5.0, 600.0, 0.1, ("TimeoutError", "app.errors.Busy"), ("ValueError",))


def test_an_entry_of_an_earlier_version_has_the_stores_retry_policy(store: JobStore) -> None:
    earlier = {k: v for k, v in SLOW.items() if not k.startswith(("retry_", "give_up_"))}
    _beat(store, "w-1", [earlier])
    slow = catalogue(store)["slow"]
    assert (slow.retry_base_s, slow.retry_max_delay_s, slow.retry_jitter) == (None, None, None)
    assert (slow.retry_on, slow.give_up_on) == ((), ())
    assert slow.retry_policy(store.settings.retry) == store.settings.retry


def test_an_entry_lives_while_some_live_worker_serves_it(store: JobStore) -> None:
    _beat(store, "w-old", [SLOW, NIGHTLY])
    _beat(store, "w-new", [SLOW])
    assert catalogue(store)["slow"].workers == ("w-old", "w-new")
    store.remove_worker("w-old")  # a worker that stops leaves the registry
    assert sorted(catalogue(store)) == ["slow"]
    store.clock_offset_s += 3 * 30.0 + 1  # w-new falls silent past three lease TTLs
    assert catalogue(store) == {}
    _beat(store, "w-new", [SLOW])
    assert catalogue(store)["slow"].workers == ("w-new",)


def test_a_worker_publishing_no_handlers_adds_nothing(store: JobStore) -> None:
    _beat(store, "w-bare", [])
    assert [w.handlers for w in store.workers()] == [[]]
    assert catalogue(store) == {}
