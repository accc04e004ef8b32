"""Contract: the history graphs read the same whatever a store keeps of the
wider widths (docs/architecture.md, Stores: written per minute, hours rolled
up by trim_history and summed from minutes at read time after the roll-up
mark; store/counters.py, "roll-up"), on every store."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from store.base import JobStore
from store.counters import HISTORY_WIDTHS, rolled_key
from tests.backends import StoreHandle

QUEUES = (None, "a", "b", "idle")


def _events(store: JobStore) -> None:
    """Two enqueued in ``a``, one in ``b``; one of ``a`` completed, ``b``'s failed with a retry left."""
    for _ in range(2):
        store.enqueue("t", queue="a")
    b = store.enqueue("t", queue="b", max_retries=1)
    [ca] = store.claim("w", ["a"], 1)
    store.complete(ca.id, ca.lease_token, None)
    [cb] = [j for j in store.claim("w", ["b"], 10) if j.id == b.id]
    store.fail(b.id, cb.lease_token, {"type": "E", "message": "m", "traceback": None})


def test_every_width_reads_the_same_across_hours_and_roll_ups(store: JobStore) -> None:
    start = store.now()
    hour = start // 3600 * 3600 + 3600
    store.clock_offset_s += hour + 3000 - start  # 50 minutes into an hour
    _events(store)
    store.clock_offset_s += 1200  # 10 minutes into the next one
    _events(store)
    sinces = (start - 3600, hour, hour + 1800, hour + 3600)

    def read() -> dict:
        return {
            (w, s, q): store.history(w, s, queue=q) for w in HISTORY_WIDTHS for s in sinces for q in QUEUES
        }

    before = read()
    assert before[(3600, hour, "a")] == {
        "enqueued": {hour: 2, hour + 3600: 2},
        "completed": {hour: 1, hour + 3600: 1},
    }
    assert before[(3600, hour + 1800, None)]["retry_scheduled"] == {hour + 3600: 1}
    assert before[(3600, start - 3600, "idle")] == {}
    assert sum(before[(60, hour, None)]["enqueued"].values()) == 6
    store.trim_history()  # the first hour has ended: rolled up
    assert read() == before
    store.clock_offset_s += 3600  # the second hour has ended too
    store.trim_history()
    assert read() == before
    store.trim_history()
    assert read() == before

    store.enqueue("t", queue="a")  # after the roll-ups: counted once, in the third hour
    after = read()
    assert after[(3600, hour, "a")]["enqueued"] == {hour: 2, hour + 3600: 2, hour + 7200: 1}
    assert after[(3600, hour, "b")] == before[(3600, hour, "b")]
    store.trim_history()
    assert read() == after

    store.clock_offset_s += 3 * 86400  # the minutes are past their retention: the hours hold them
    store.trim_history()
    assert store.history(60, start - 3600) == {}
    hours = {(s, q): store.history(3600, s, queue=q) for s in sinces for q in QUEUES}
    assert hours == {(s, q): after[(3600, s, q)] for s in sinces for q in QUEUES}


def test_an_open_transaction_holds_the_roll_up_back_on_postgresql(
    handle: StoreHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PostgreSQL change is stamped with its transaction's start, so one
    that began inside an hour may commit after the hour ended: the roll-up
    reads the oldest other open transaction's start (``writes_since``, from
    pg_stat_activity) and rolls up no hour that ended after it."""
    if handle.backend != "postgresql":
        pytest.skip("PostgreSQL stamps a change with its transaction's start")
    store = handle.store
    dialect = store.dialect  # type: ignore[attr-defined]
    engine = create_engine(handle.url)
    try:
        with engine.connect() as other:
            assert store.tx(dialect.writes_since) is None  # type: ignore[attr-defined]
            other.execute(text("SELECT 1"))  # a transaction opens (autobegin)
            began = other.execute(text("SELECT extract(epoch FROM now())")).scalar_one()
            assert store.tx(dialect.writes_since) == pytest.approx(float(began))  # type: ignore[attr-defined]
            other.rollback()
            assert store.tx(dialect.writes_since) is None  # type: ignore[attr-defined]
    finally:
        engine.dispose()

    start = store.now()
    hour = start // 3600 * 3600 + 3600
    store.clock_offset_s += hour + 3000 - start  # 50 minutes into an hour
    store.enqueue("t", queue="a")
    store.clock_offset_s += 7200  # two hours on: both ended
    open_since = hour + 3300  # as if a transaction began 55 minutes into it and is open still
    monkeypatch.setattr(dialect, "writes_since", lambda conn: open_since - store.clock_offset_s)
    store.trim_history()
    assert _mark(store) == hour  # that hour is held back
    monkeypatch.undo()
    store.trim_history()
    assert _mark(store) == hour + 7200  # then rolled up, with the next
    assert store.history(3600, hour - 3600, queue="a")["enqueued"] == {hour: 1}


def _mark(store: JobStore) -> float:
    """The hour width's roll-up mark (store/counters.py ``rolled_key``), 0 when unset."""
    stmt = text("SELECT n FROM leasehold_counters WHERE key = :k")
    rows = store.read(stmt, {"k": rolled_key(3600)})  # type: ignore[attr-defined]
    return float(rows[0]["n"]) if rows else 0.0
