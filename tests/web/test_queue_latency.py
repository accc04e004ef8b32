"""Queue latency shown (every store): GET /api/queues, /metrics, the
overview's queue rows and the queue page; and ``leasehold queue list``."""

# ruff: noqa: F811 - the fixtures are imported from console_fixtures and requested by name
from __future__ import annotations

import json
import os
import re
import time

import pytest
from click.testing import CliRunner
from flask.testing import FlaskClient

from leasehold.cli import leasehold
from store.base import JobStore
from tests.backends import StoreHandle
from tests.web.conftest import VIEWER, api_app, api_client  # noqa: F401 - fixtures
from tests.web.console_fixtures import ConsoleClient, console_app, viewer  # noqa: F401 - fixtures


def test_api_and_metrics_show_latency(api_client: FlaskClient, store: JobStore) -> None:
    started = time.monotonic()
    store.enqueue("t", queue="mail")
    store.pause_queue("mail", actor="operator:ann")
    store.clock_offset_s += 90  # paused: the latency grows
    [mail] = api_client.get("/api/queues", headers=VIEWER).json["items"]
    text = api_client.get("/metrics", headers=VIEWER).text
    took = time.monotonic() - started  # the real time the steps took (a loaded machine's seconds)
    assert mail["paused"] is True and 90 <= mail["latency_s"] <= 90 + took + 0.01
    [value] = re.findall(r'^leasehold_queue_latency_seconds\{queue="mail"\} (\S+)$', text, flags=re.M)
    assert 90 <= float(value) <= 90 + took + 0.01


def test_console_overview_and_queue_page_show_latency(viewer: ConsoleClient, store: JobStore) -> None:
    started = time.monotonic()
    store.enqueue("t", queue="mail")
    store.clock_offset_s += 300
    assert re.search(r'data-latency="mail">5\.\d min<', viewer.get("/").text)
    page = viewer.get("/queues/mail").text
    took = time.monotonic() - started  # the real time the steps took (a loaded machine's seconds)
    [seconds] = re.findall(r'id="queue-latency" data-latency-s="([\d.]+)"', page)
    assert 300 <= float(seconds) <= 300 + took + 0.01 and re.search(r"5\.\d min", page)


def test_leasehold_queue_list(handle: StoreHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("LEASEHOLD_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("LEASEHOLD_STORE_URL", handle.url)
    handle.store.enqueue("t", queue="mail")
    handle.store.pause_queue("mail", actor="operator:ann")
    done = CliRunner().invoke(leasehold, ["queue", "list", "--json"], prog_name="leasehold")
    assert done.exit_code == 0, done.output
    [row] = json.loads(done.stdout)
    assert (row["name"], row["paused"], row["counts"]["Queued"]) == ("mail", True, 1) and row[
        "latency_s"
    ] >= 0
    text = CliRunner().invoke(leasehold, ["queue", "list"], prog_name="leasehold").stdout
    [header, line] = text.splitlines()
    assert header.split()[:3] == ["queue", "state", "latency"]
    assert line.split()[:2] == ["mail", "paused"] and line.split()[3] == "1"  # Queued
