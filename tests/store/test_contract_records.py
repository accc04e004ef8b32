"""Contract: the record port (store/ports.py) on every store: a change's
guards and steps as ``ports.apply_change`` states them, paging and pruning by
score, expiry by the store's clock, holds with their fencing token. The
features written over it (store/registry.py, store/bookings.py) are checked
by the other contract files through the JobStore methods."""

from __future__ import annotations

import pytest

from store.base import JobStore
from store.ports import Change, Record, apply_change, check_kind

KIND = "test_thing"


def test_a_change_creates_then_merges(store: JobStore) -> None:
    now = store.now()
    first, applied = store.record_change(
        KIND,
        "a",
        Change(set={"n": 1, "tags": ["x"], "nested": {}}, init={"state": "new"}, stamp_new=("born",)),
    )
    assert applied and first is not None
    assert first.value["n"] == 1 and first.value["tags"] == ["x"] and first.value["state"] == "new"
    assert first.value["nested"] == {} and abs(first.value["born"] - now) < 5
    again, applied = store.record_change(
        KIND, "a", Change(set={"n": 2}, init={"state": "ignored"}, drop=("tags",), add={"hits": 3})
    )
    assert applied and again is not None
    assert again.value == {"n": 2, "nested": {}, "state": "new", "born": first.value["born"], "hits": 3}
    assert store.record_get(KIND, "a") == again
    assert store.record_get(KIND, "missing") is None


def test_guards_when_and_rise_and_create(store: JobStore) -> None:
    assert store.record_change(KIND, "g", Change(set={"x": 1}, create=False)) == (None, False)
    store.record_change(KIND, "g", Change(set={"state": "quiet", "tick": 5.0}))
    kept, applied = store.record_change(KIND, "g", Change(set={"x": 9}, when={"state": "stop"}))
    assert not applied and kept is not None and "x" not in kept.value
    done, applied = store.record_change(KIND, "g", Change(drop=("state",), when={"state": "quiet"}))
    assert applied and done is not None and "state" not in done.value
    # when None: the field must be absent (it is now)
    assert store.record_change(KIND, "g", Change(set={"y": 1}, when={"state": None}))[1]
    assert not store.record_change(KIND, "g", Change(set={"tick": 4.0}, rise=("tick", 4.0)))[1]
    moved, applied = store.record_change(KIND, "g", Change(set={"tick": 6.0}, rise=("tick", 6.0)))
    assert applied and moved is not None and moved.value["tick"] == 6.0


def test_pages_by_score_and_keeps_the_newest(store: JobStore) -> None:
    for i, key in enumerate(["c", "a", "d", "b"]):
        store.record_change(KIND, key, Change(set={"at": 100.0 + i}, score_field="at"))
    store.record_change(KIND, "unscored", Change(set={"x": 1}))  # never paged
    assert [r.key for r in store.record_page(KIND, 10)] == ["b", "d", "a", "c"]
    assert [r.key for r in store.record_page(KIND, 2, oldest_first=True)] == ["c", "a"]
    assert store.record_page(KIND, 1)[0].score == 103.0
    store.record_change(KIND, "e", Change(set={"at": 104.0}, score_field="at", keep=3))
    assert [r.key for r in store.record_page(KIND, 10)] == ["e", "b", "d"]
    assert store.record_get(KIND, "a") is None and store.record_get(KIND, "unscored") is not None
    assert store.record_drop(KIND, "e") and not store.record_drop(KIND, "e")
    assert [r.key for r in store.record_page(KIND, 10)] == ["b", "d"]


def test_prune_by_age_removes_the_old_only(store: JobStore) -> None:
    now = store.now()
    for key, age in (("old1", 100), ("old2", 50), ("fresh", 1)):
        store.record_change(KIND, key, Change(set={"seen": now - age}, score_field="seen"))
    assert sorted(store.record_prune(KIND, older_than_s=30, limit=10)) == ["old1", "old2"]
    assert [r.key for r in store.record_page(KIND, 10)] == ["fresh"]
    assert store.record_prune(KIND, older_than_s=30, limit=10) == []


def test_expiry_follows_the_store_clock(store: JobStore) -> None:
    counted, _ = store.record_change(KIND, "w", Change(add={"n": 1}, ttl_s=60))
    assert counted is not None and counted.value["n"] == 1 and 59 < (counted.expires_in or 0) <= 60
    counted, _ = store.record_change(KIND, "w", Change(add={"n": 1}, ttl_s=60))
    assert counted is not None and counted.value["n"] == 2
    store.clock_offset_s += 61
    assert store.record_get(KIND, "w") is None
    fresh, applied = store.record_change(KIND, "w", Change(add={"n": 1}, ttl_s=60))
    assert applied and fresh is not None and fresh.value["n"] == 1  # a new window
    store.clock_offset_s += 61
    pruned = store.record_prune(KIND, older_than_s=None, limit=10)
    assert pruned in (["w"], [])  # Redis may find none: its keys expire on their own
    assert store.record_get(KIND, "w") is None


def test_a_hold_is_fenced(store: JobStore) -> None:
    first = store.hold("h", "w-1", 30)
    assert first is not None
    assert store.hold("h", "w-1", 30) == first  # a renewal keeps the token
    assert store.hold("h", "w-2", 30) is None
    held = store.held("h")
    assert held is not None and (held.holder, held.token) == ("w-1", first)
    assert not store.unhold("h", "w-2") and store.unhold("h", "w-1")
    assert store.held("h") is None
    second = store.hold("h", "w-2", 30)
    assert second == first + 1  # the token survives a release, never reused
    store.clock_offset_s += 31  # expired: anyone may take it, with a new token
    assert store.held("h") is None
    third = store.hold("h", "w-1", 30)
    assert third == second + 1


def test_apply_change_is_the_statement_both_engines_follow() -> None:
    """The pure rule itself, with no store: what SQL runs in Python and
    lua/record_change.lua runs in Redis."""
    now = 1000.0
    made, applied = apply_change(None, "k", Change(set={"a": 1}, stamp=("t",), ttl_s=5, score_field="t"), now)
    assert applied and made == Record("k", {"a": 1, "t": now}, now, 5)
    kept, applied = apply_change(made, "k", Change(set={"a": 2}, when={"a": 3}), now)
    assert not applied and kept is made
    assert apply_change(None, "k", Change(create=False), now) == (None, False)
    with pytest.raises(ValueError):
        check_kind("bad:kind")
