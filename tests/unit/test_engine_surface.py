"""The engines' surface (docs/architecture.md, "Stores"): how many methods of
the store's ports each engine implements itself, and how many Lua functions
keep records. A feature written once over the ports (store/registry.py,
store/bookings.py) adds nothing here; a feature written per engine does.

A store's classes are its MRO and its parts' (store/parts.py). A port method
is an abstract method of one of them from outside its engine package
(``JobStore`` with ``OperatingContract``, ``SharedStore``'s engine halves,
``RecordPort``); an engine implements it when a class of ``store/sql/*`` (or
``store/redis/*``) among them defines it (a ``delegate`` line only names the
part that does).
``FlowContract``'s methods are not abstract (a store without flow control
refuses it), so they are counted apart.
"""

from __future__ import annotations

import re

import pytest

from store.contract_flow import FlowContract
from store.parts import Part, delegate
from store.ports import RecordPort
from store.redis.scripts import LUA_DIR
from store.redis.store import RedisStore
from store.sql.store import SqlStore

#: Most port methods one engine implements (SQL 36; Redis 37, which
#: overrides count_jobs as one index read; both read the handler minute
#: buckets, handler_minutes, from where each engine writes them, and
#: answer the schema check, schema_revision, from their own schema).
MAX_ENGINE_METHODS = 37
#: Most Lua functions that keep records (touch a ``rec:``/``recs:`` key).
MAX_RECORD_FUNCTIONS = 3
ENGINES = {SqlStore: ("store.sql",), RedisStore: ("store.redis",)}


def _classes(store: type) -> list[type]:
    """The store's MRO, its parts' classes and the record port they implement."""
    found = [*store.__mro__, RecordPort]
    for part in store.parts.values():  # type: ignore[attr-defined]
        found += [k for k in part.__mro__ if k not in found and k not in (Part, object)]
    return found


def _engine_classes(store: type, packages: tuple[str, ...]) -> list[type]:
    return [k for k in _classes(store) if k.__module__.startswith(packages)]


def port_methods(store: type) -> set[str]:
    """Names abstract in a class ``store`` inherits from outside its engine."""
    packages = ENGINES[store]
    return {
        name
        for k in _classes(store)
        if not k.__module__.startswith(packages)
        for name, value in vars(k).items()
        if getattr(value, "__isabstractmethod__", False)
    }


def engine_defines(store: type, names: set[str]) -> set[str]:
    """Which of ``names`` a class of the store's engine package defines."""
    return {
        n
        for k in _engine_classes(store, ENGINES[store])
        for n, v in vars(k).items()
        if n in names and not isinstance(v, delegate)
    }


def flow_methods(store: type) -> set[str]:
    flow = {n for n, v in vars(FlowContract).items() if callable(v) and not n.startswith("__")}
    return engine_defines(store, flow)


@pytest.mark.parametrize("store", list(ENGINES), ids=lambda s: s.__name__)
def test_each_engine_implements_few_port_methods(store: type) -> None:
    implemented = engine_defines(store, port_methods(store))
    assert len(implemented) <= MAX_ENGINE_METHODS, sorted(implemented)
    # The record port is implemented whole, and the record-keeping features are not.
    record_port = {n for n, v in vars(RecordPort).items() if getattr(v, "__isabstractmethod__", False)}
    assert record_port <= implemented
    written_once = {"acquire_lock", "worker_heartbeat", "workers", "prune_workers", "record_recovery_run"}
    written_once |= {"save_operation", "operations", "save_schedules", "record_tick", "record_failure"}
    written_once |= {"failure_count", "prune_failures", "maintenance_runs", "lock_info", "_command_worker"}
    assert not engine_defines(store, written_once)


def test_the_count_sees_what_an_engine_defines() -> None:
    """The counting itself: an engine method is seen, a shared one is not."""
    assert {"claim", "record_change", "hold"} <= engine_defines(SqlStore, port_methods(SqlStore))
    assert "enqueue" not in engine_defines(SqlStore, port_methods(SqlStore))  # shared, concrete
    assert "set_queue_limits" in flow_methods(SqlStore)


def test_flow_methods_are_counted_apart() -> None:
    """Reported, not bounded: flow control is one engine's work in progress."""
    sql, redis = flow_methods(SqlStore), flow_methods(RedisStore)
    assert len(sql) >= 10 and len(redis) <= len(sql)


def test_at_most_three_lua_functions_keep_records() -> None:
    record_key = re.compile(r"P \.\. 'recs?:")
    keeping = sorted(p.stem for p in LUA_DIR.glob("*.lua") if record_key.search(p.read_text()))
    assert keeping == ["record_change", "record_hold", "record_prune"]
    assert len(keeping) <= MAX_RECORD_FUNCTIONS
    # No function writes the key shapes of the features they replaced.
    retired = re.compile(
        r"P \.\. '(worker|workers|lock|failure|schedule|schedules|operations|recovery_runs)[:']"
    )
    assert not [p.name for p in LUA_DIR.rglob("*.lua") if retired.search(p.read_text())]
