"""deploy/prometheus-alerts.yml: valid for Prometheus (``promtool check
rules``: ``make test`` puts promtool, from Debian's ``prometheus`` package, at
``$PROMTOOL``; ``make promtool`` alone does too) and every series its
expressions name is one /metrics exports."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from store import StoreSettings
from tests.conftest import make_handle
from tests.web.conftest import VIEWER, api_app_for

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus-alerts.yml"
SERIES = re.compile(r"\bleasehold_[a-z_]+\b")


def _exported(request: pytest.FixtureRequest, tmp_path: Path) -> set[str]:
    """Series names of a scrape of a store with a queue, a worker-less queue and an alert rule."""
    handle = make_handle("sqlite", request, tmp_path, StoreSettings())
    try:
        handle.store.enqueue("work", {})
        app = api_app_for(handle)
        rule = {"name": "x", "when": "job_failed", "webhook": "https://example.org/hook"}
        with app.test_client() as client:
            assert (
                client.post(
                    "/api/alerts", json=rule, headers={"Authorization": "Bearer op-token"}
                ).status_code
                == 201
            )
            text = client.get("/metrics", headers=VIEWER).get_data(as_text=True)
    finally:
        handle.close()
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names |= {sample.name for sample in family.samples}
    return names


def test_every_series_the_rules_name_is_exported(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    named = {name for rule in rules for name in SERIES.findall(rule["expr"])}
    assert {r["alert"] for r in rules} >= {
        "LeaseholdJobFailed",
        "LeaseholdFailureRate",
        "LeaseholdQueueLatency",
        "LeaseholdQueueWithoutWorkers",
    }
    missing = named - _exported(request, tmp_path)
    assert not missing, f"the rules name series /metrics does not export: {sorted(missing)}"


def _promtool() -> str:
    """The promtool to run: ``$PROMTOOL`` (set by ``make test``, which installs
    it: a missing one fails the test), else one on PATH; skips when neither."""
    given = os.environ.get("PROMTOOL")
    if given:
        assert os.access(given, os.X_OK), f"PROMTOOL={given} is not an executable (make promtool)"
        return given
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (make promtool, or PROMTOOL=path)")
    return found


def test_promtool_accepts_the_rules() -> None:
    done = subprocess.run(
        [_promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 5 rules found" in done.stdout
