"""The history graphs' bins, zero-fill and geometry (webapp/console/history.py), no store."""

from __future__ import annotations

import pytest

from webapp.console import history
from webapp.console.history import RANGES, bin_starts, build, pick_range, zero_fill

#: 2024-05-01 12:07:30 UTC.
NOW = 1714565250.0


def test_bins_are_aligned_and_end_with_the_one_holding_now() -> None:
    hour = RANGES["1h"]
    starts = bin_starts(hour, NOW)
    assert len(starts) == 12 and all(s % 300 == 0 for s in starts)
    assert starts[-1] <= NOW < starts[-1] + 300 and starts[0] == starts[-1] - 11 * 300
    week = bin_starts(RANGES["7d"], NOW)
    assert len(week) == 28 and all(s % 21600 == 0 for s in week) and NOW - week[0] < 7 * 86400
    assert pick_range("24h").width_s == 3600 and pick_range("bogus") is RANGES["1h"]
    assert pick_range(None) is RANGES["1h"]


def test_zero_fill_sums_buckets_into_bins_and_fills_the_gaps() -> None:
    starts = [0.0, 300.0, 600.0]
    minutes = {0.0: 1, 60.0: 2, 540.0: 4, 600.0: 8, 900.0: 16, -60.0: 32}
    assert zero_fill(minutes, starts, 300) == [3, 4, 8]
    assert zero_fill({}, starts, 300) == [0, 0, 0]
    assert zero_fill({1.0: 5}, [], 300) == []


def test_build_sums_kinds_per_series_and_renders_a_table() -> None:
    rng = RANGES["1h"]
    starts = bin_starts(rng, NOW)
    raw = {
        "enqueued": {starts[0]: 5, starts[-1] + 60: 2},
        "completed": {starts[-1]: 4},
        "failed": {starts[3]: 1},
        "lease_expired": {starts[3] + 120: 2},
        "retry_scheduled": {starts[-2]: 3},
    }
    view = build(raw, rng, NOW)
    throughput, failures = view.graphs
    assert view.since_s == starts[0]
    assert [(s.key, s.total) for s in throughput.series] == [("completed", 4), ("enqueued", 7)]
    assert [(s.key, s.total) for s in failures.series] == [
        ("failed", 1),
        ("lease_expired", 2),
        ("retried", 3),
    ]
    enqueued = throughput.series[1].values
    assert enqueued[0] == 5 and enqueued[-1] == 2 and sum(enqueued[1:-1]) == 0 and len(enqueued) == 12
    assert throughput.peak == 5 and throughput.rows[-1] == ("12:05", [4, 2])
    assert "completed 4" in throughput.summary and "enqueued 7" in throughput.summary


@pytest.mark.parametrize("peak", [0, 5])
def test_points_stay_inside_the_plot(peak: int) -> None:
    series = history.Series("x", "X", [0, peak, 1 if peak else 0])
    ys = [float(p.split(",")[1]) for p in series.points(peak).split()]
    xs = [float(p.split(",")[0]) for p in series.points(peak).split()]
    assert xs == [5.0, 15.0]  # the newest bin, still filling, is not a point of the line
    assert all(history.PAD <= y <= history.PLOT_H - history.PAD for y in ys)
    assert ys[0] == history.PLOT_H - history.PAD and (peak == 0 or ys[1] == history.PAD)
    x, y = series.filling(peak)
    assert x == 25.0 and history.PAD <= y <= history.PLOT_H - history.PAD


def test_a_bin_without_a_value_breaks_the_line_rather_than_dropping_it_to_zero() -> None:
    """A run time with no runs in its bin is no value, not 0 ms."""
    series = history.Series("p50", "p50 ms", [2.0, None, None, 4.0, 3.0, None])
    graph = history.Graph("run-time", "Run time", [series], [f"12:0{i}" for i in range(6)])
    assert graph.peak == 4.0
    assert [len(seg.split()) for seg in series.segments(graph.peak)] == [1, 2]
    assert series.filling(graph.peak) is None  # the filling bin has no runs yet: no dot
    assert graph.hovers[1][1] == "12:01: p50 ms —"


def test_each_bin_has_its_values_in_words_for_the_hover() -> None:
    graph = history.Graph(
        "g", "G", [history.Series("a", "A", [1, 2]), history.Series("b", "B", [3, 4])], ["12:00", "12:05"]
    )
    assert graph.hovers == [(0, "12:00: A 1, B 3"), (10, "12:05 (still filling): A 2, B 4")]
