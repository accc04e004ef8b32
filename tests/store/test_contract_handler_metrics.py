"""Contract: per-handler minute buckets (store/handler_metrics.py), written
with the ack or failure they count, read back exactly (no sample cap), with
run-time percentiles within the sketch's relative accuracy, in minutes of the
store's clock, on every store."""

from __future__ import annotations

import math

import pytest

from store import handler_metrics as hm
from store.base import JobStore
from store.errors import ValidationError
from store.models import JobSpec
from tests.store.helpers import ERROR

N = 1781


def _to_minute(store: JobStore, second: float) -> float:
    """Move the store's clock to ``second`` seconds into the next minute; its start."""
    now = store.now()
    start = now // 60 * 60 + 60
    store.clock_offset_s += start + second - now
    return start


def _claim_all(store: JobStore, queue: str, n: int) -> list:
    out: list = []
    while len(out) < n:
        got = store.claim("w", [queue], 500)
        assert got
        out.extend(got)
    return out


def _nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


def test_every_completion_is_counted_with_its_run_time(store: JobStore) -> None:
    minute = _to_minute(store, 1)
    store.enqueue_many([JobSpec("hm.a", queue="hm") for _ in range(N)])
    running = _claim_all(store, "hm", N)
    runs: list[float] = []
    step = len(running) // 10 + 1
    for k in range(10):  # ten groups, run times from ~0 to ~40 s apart
        store.clock_offset_s += 0.004 * 2**k
        group = running[k * step : (k + 1) * step]
        done = store.complete_many([(j.id, j.lease_token, None) for j in group])
        runs += [(j.completed_at - j.started_at).total_seconds() * 1000 for j in done]
    assert len(runs) == N

    found = hm.metrics(store, "hm.a", "1h")
    assert found["handler"] == "hm.a" and found["window"] == "1h"
    buckets = {b["start"]: b for b in found["buckets"]}
    assert len(found["buckets"]) == 60 and list(buckets) == sorted(buckets)
    assert buckets[minute]["succeeded"] == N  # exact: no sample cap
    assert sum(b["succeeded"] for b in found["buckets"]) == N
    assert buckets[minute]["failed"] == buckets[minute]["retried"] == 0
    for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
        exact = _nearest_rank(runs, q)
        got = buckets[minute]["run_time_ms"][name]
        assert abs(got - exact) <= hm.RELATIVE_ACCURACY * exact + 0.01, (name, got, exact)
    empty = buckets[minute - 60]
    assert empty["succeeded"] == 0 and empty["run_time_ms"] == {"p50": None, "p95": None, "p99": None}
    assert hm.metrics(store, "hm.never", "1h")["buckets"][-1]["succeeded"] == 0


def test_failures_are_counted_failed_or_retried_in_their_minute(store: JobStore) -> None:
    minute = _to_minute(store, 50)
    a, b = store.enqueue("hm.f", queue="hm", max_retries=3), store.enqueue("hm.f", queue="hm", max_retries=3)
    store.enqueue("hm.other", queue="hm")
    running = {j.id: j for j in _claim_all(store, "hm", 3)}
    store.clock_offset_s += 2.5
    store.fail(a.id, running[a.id].lease_token, ERROR)  # retried
    store.clock_offset_s += 20  # the next minute
    store.fail(b.id, running[b.id].lease_token, ERROR, permanent=True)  # failed
    minutes = store.handler_minutes("hm.f", minute - 60)
    first, bins = hm.tally(minutes[int(minute)])
    assert first == {hm.RETRIED: 1}
    assert hm.tally(minutes[int(minute) + 60])[0] == {hm.FAILED: 1}
    assert abs(hm.percentile(bins, 0.5) - 2500) <= 0.02 * 2500 + 50  # the 2.5 s run
    assert store.handler_minutes("hm.other", minute - 60) == {}


def test_windows_sum_minutes_into_their_buckets(store: JobStore) -> None:
    _to_minute(store, 5)
    store.enqueue_many([JobSpec("hm.w", queue="hm") for _ in range(3)])
    jobs = _claim_all(store, "hm", 3)
    for j in jobs:
        store.complete(j.id, j.lease_token)
        store.clock_offset_s += 600  # ten minutes apart
    day = hm.metrics(store, "hm.w", "24h")["buckets"]
    week = hm.metrics(store, "hm.w", "7d")["buckets"]
    assert len(day) == 96 and len(week) == 168
    assert sum(b["succeeded"] for b in day) == sum(b["succeeded"] for b in week) == 3
    assert all(b["start"] % 900 == 0 for b in day) and all(b["start"] % 3600 == 0 for b in week)
    store.clock_offset_s += hm.RETENTION_S + 3600
    store.trim_history()
    assert sum(b["succeeded"] for b in hm.metrics(store, "hm.w", "7d")["buckets"]) == 0


def test_a_bad_window_names_the_field(store: JobStore) -> None:
    with pytest.raises(ValidationError) as raised:
        hm.metrics(store, "hm.a", "2h")
    assert raised.value.field == "window"


def test_a_workers_fused_ack_and_a_parents_ack_are_counted(store: JobStore) -> None:
    minute = _to_minute(store, 1)
    first = store.enqueue("hm.fused", queue="hm")
    [claimed] = store.claim("w", ["hm"], 1)
    lost, _ = store.complete_and_claim([(first.id, claimed.lease_token, None)], "w", [["hm"]], 0)
    assert lost == [None]
    store.create_batch([JobSpec("hm.p", queue="hm"), JobSpec("hm.c", queue="hm")], kind="chain")
    [parent] = store.claim("w", ["hm"], 1)  # the chain's first: the second waits for it
    store.complete(parent.id, parent.lease_token)
    assert hm.tally(store.handler_minutes("hm.fused", minute)[int(minute)])[0] == {hm.SUCCEEDED: 1}
    assert hm.tally(store.handler_minutes("hm.p", minute)[int(minute)])[0] == {hm.SUCCEEDED: 1}
