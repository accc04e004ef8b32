"""Contract: the audit log keeps every operator action for its own retention
(LEASEHOLD_RETENTION_AUDIT), never pushed out by volume, pruned by age by the
maintenance run, read page by page at a bounded cost; on every store. Closed
login-failure windows are pruned too."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest

from store.base import JobStore
from store.errors import ValidationError
from store.lifecycle import EventKind
from store.maintenance import AUDIT_TASK, prune_closed_failures, run_audit_retention
from tests.backends import REDIS_BACKENDS, StoreHandle, redis_engine
from workers.services import MaintenanceService

DAY = 86400.0
RETENTION = 90 * DAY


def test_ten_thousand_and_one_hundred_entries_push_nothing_out(store: JobStore) -> None:
    store.record_action("operator:ann", EventKind.BULK_STARTED, "operation first", "cancel of 10,100 jobs")
    with ThreadPoolExecutor(8) as pool:  # eight writers, as eight web processes would be
        list(
            pool.map(
                lambda i: store.record_audit(EventKind.DELETED, "operator:ann", f"job {i}"), range(10_100)
            )
        )
    store.record_action("operator:ann", EventKind.BULK_FINISHED, "operation first", "10,100 canceled")
    entries, cursor = [], None
    while True:
        page = store.audit_page(1000, cursor)
        entries += page.items
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(entries) == 10_102
    assert (entries[-1].kind, entries[-1].message) == (
        EventKind.BULK_STARTED,
        "operation first: cancel of 10,100 jobs",
    )
    assert entries[0].kind == EventKind.BULK_FINISHED
    assert run_audit_retention(store, RETENTION, "w-1").count == 0  # type: ignore[union-attr]
    assert store.audit_page(1000, cursor).items[-1].kind == EventKind.BULK_STARTED


def test_an_entry_older_than_its_retention_is_pruned_by_maintenance(store: JobStore) -> None:
    store.record_action("operator:ann", EventKind.SCHEDULE_DISABLED, "schedule nightly")
    store.clock_offset_s += RETENTION - DAY
    store.record_action("operator:bob", EventKind.SCHEDULE_ENABLED, "schedule nightly")
    store.clock_offset_s += 2 * DAY  # ann's entry is now older than the retention, bob's is not
    run = run_audit_retention(store, RETENTION, "w-1")
    assert run is not None and run.count == 1
    assert [(e.actor, e.kind) for e in store.audit()] == [("operator:bob", EventKind.SCHEDULE_ENABLED)]
    assert store.maintenance_runs(AUDIT_TASK)[0].count == 1
    assert run_audit_retention(store, 0.0, "w-1") is None  # 0 keeps forever
    store.clock_offset_s += RETENTION
    assert run_audit_retention(store, 0.0, "w-1") is None and len(store.audit()) == 1


def test_the_maintenance_service_prunes_audit_entries_and_closed_failure_windows(store: JobStore) -> None:
    store.record_action("operator:ann", EventKind.JOBS_PURGED, "jobs", "12 pruned")
    store.record_failure("login:ann@10.0.0.1", 60.0)
    store.record_failure("login:bob@10.0.0.2", 3600.0)
    store.clock_offset_s += 2 * DAY
    MaintenanceService(store, "w-1", 60.0, {}, 300.0, audit_retention_s=DAY).tick()
    assert store.audit() == []
    assert store.failure_count("login:ann@10.0.0.1") == (0, 0.0)
    assert prune_closed_failures(store) == 0  # nothing left to prune


def test_closed_failure_windows_are_pruned_and_open_ones_kept(handle: StoreHandle) -> None:
    store = handle.store
    for i in range(5):
        store.record_failure(f"login:user{i}@1.2.3.4", 60.0)
    store.record_failure("login:still@1.2.3.4", 600.0)
    store.clock_offset_s += 120
    pruned = prune_closed_failures(store)
    assert pruned == (0 if handle.backend in REDIS_BACKENDS else 5)  # Redis keys expire with their window
    assert store.failure_count("login:still@1.2.3.4")[0] == 1
    assert store.record_failure("login:user0@1.2.3.4", 60.0) == 1  # a fresh window


def test_audit_pages_are_newest_first_and_cover_every_entry_once(store: JobStore) -> None:
    for i in range(25):
        store.record_action("operator:ann", EventKind.WORKER_FORGOTTEN, f"worker w-{i}")
        store.clock_offset_s += 0.001
    seen, cursor, sizes = [], None, []
    while True:
        page = store.audit_page(10, cursor)
        sizes.append(len(page.items))
        seen += [e.message for e in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert sizes == [10, 10, 5]
    assert seen == [f"worker w-{i}" for i in reversed(range(25))]
    assert [e.message for e in store.audit(5)] == seen[:5]
    for bad in ("x", "-1", "1.5:z"):
        with pytest.raises(ValidationError):
            store.audit_page(10, bad)
    with pytest.raises(ValidationError):
        store.audit_page(0)


def test_record_action_names_actor_action_target_and_detail(store: JobStore) -> None:
    store.record_action("operator:ann", EventKind.SCHEDULE_RUN, "schedule nightly", "job 0190")
    store.record_action("operator:ann", EventKind.WORKER_FORGOTTEN, "worker host.12")
    store.record_action("operator:ann", EventKind.JOBS_PURGED, "jobs", "3 pruned\x00")
    [purged, forgot, ran] = store.audit()
    assert (ran.actor, ran.kind, ran.message, ran.job_id) == (
        "operator:ann",
        EventKind.SCHEDULE_RUN,
        "schedule nightly: job 0190",
        "",
    )
    assert forgot.message == "worker host.12" and purged.message == "jobs: 3 pruned\ufffd"
    with pytest.raises(ValidationError) as raised:
        store.record_action("operator:ann", EventKind.JOBS_PURGED, " ")
    assert raised.value.field == "target"
    assert store.event_counts().get(EventKind.SCHEDULE_RUN.value) == 1


def test_redis_moves_the_audit_list_of_an_earlier_release(handle: StoreHandle) -> None:
    if handle.backend not in REDIS_BACKENDS:
        pytest.skip("the Redis audit list of earlier releases")
    store = handle.store
    engine = redis_engine(store)
    client, keys = engine._client, engine.keys
    now = store.now()
    old = [
        {"at": repr(now - 10 + i), "kind": "canceled", "actor": "operator:old", "job": str(uuid.uuid4())}
        for i in range(3)
    ]
    for entry in old:  # LPUSH: newest first, as earlier releases wrote it
        client.lpush(keys.audit_legacy, orjson.dumps(entry))
    store.record_action("operator:new", EventKind.WORKER_FORGOTTEN, "worker w-1")
    fresh = handle.open()  # another process, after the upgrade
    assert [e.actor for e in fresh.audit()] == ["operator:new"] + ["operator:old"] * 3
    assert [e.job_id for e in fresh.audit()][1:] == [e["job"] for e in reversed(old)]
    assert client.exists(keys.audit_legacy) == 0


def test_redis_pages_split_entries_of_one_time_exactly(handle: StoreHandle) -> None:
    if handle.backend not in REDIS_BACKENDS:
        pytest.skip("entries sharing a score exist on Redis only (one script, one time)")
    store = handle.store
    engine = redis_engine(store)
    client, keys = engine._client, engine.keys
    at = store.now()
    for i in range(7):  # what one script deleting 7 jobs writes: one time, 7 entries
        entry = {"at": repr(at), "kind": "deleted", "actor": "operator:ann", "job": f"job-{i}"}
        client.zadd(keys.audit, {orjson.dumps(entry): at})
    seen, cursor = [], None
    while True:
        page = store.audit_page(3, cursor)
        seen += [e.job_id for e in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert sorted(seen) == [f"job-{i}" for i in range(7)] and len(seen) == 7
