"""The recent-jobs gauges' percentiles (webapp/metrics.py), no store."""

from __future__ import annotations

from webapp.metrics import _window, percentile


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert [percentile(values, p) for p in (50, 90, 99, 100)] == [50.0, 90.0, 99.0, 100.0]
    assert percentile([3.0], 50) == 3.0 and percentile([1.0, 9.0], 99) == 9.0


def test_window_is_a_gauge_with_no_series_while_empty() -> None:
    family = _window("leasehold_recent_job_run", "doc", [2.0, 1.0, 4.0, 3.0])
    assert family.type == "gauge" and family.name == "leasehold_recent_job_run_seconds"
    assert {s.labels["percentile"]: s.value for s in family.samples} == {
        "50": 2.0, "90": 4.0, "99": 4.0, "100": 4.0,
    }  # fmt: skip
    assert _window("leasehold_recent_job_run", "doc", []).samples == []
