"""``leasehold alerts list|add|delete|test|mute``: rules made, tested
against a real webhook sink, muted and deleted from the command line,
audited as the CLI's operator; one-line errors."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from click.testing import CliRunner, Result

from leasehold.cli import leasehold
from store.alerts import get_alert
from store.lifecycle import EventKind
from tests.alerts_sink import Sink, start_sink
from tests.backends import StoreHandle
from tests.workers.test_cli import one_line_error


def error_naming(result: Result, text: str) -> None:
    assert text in one_line_error(result)


@pytest.fixture
def cli(handle: StoreHandle, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    for name in [n for n in os.environ if n.startswith("LEASEHOLD_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("LEASEHOLD_STORE_URL", handle.url)
    monkeypatch.setenv("USER", "ann")
    yield CliRunner()


@pytest.fixture
def sink() -> Iterator[Sink]:
    server, s = start_sink(Sink())
    yield s
    server.shutdown()
    server.server_close()


def invoke(runner: CliRunner, *args: str) -> Result:
    return runner.invoke(leasehold, list(args), prog_name="leasehold")


def test_add_list_test_mute_delete(handle: StoreHandle, cli: CliRunner, sink: Sink) -> None:
    assert invoke(cli, "alerts", "list").stdout == "no alert rules\n"
    added = invoke(
        cli,
        "alerts",
        "add",
        "slow",
        "--when",
        "queue_latency",
        "--threshold",
        "60",
        "--queue",
        "mail",
        "--webhook",
        sink.url,
        "--secret",
        "k3y",
    )
    assert added.exit_code == 0, added.output
    alert_id = added.stdout.strip()
    listed = invoke(cli, "alerts", "list").stdout
    assert alert_id in listed and "queue_latency queue=mail threshold=60.0" in listed
    assert "s3cr3t-path" not in listed and "k3y" not in listed
    [row] = json.loads(invoke(cli, "alerts", "list", "--json").stdout)["items"]
    assert row["secret_set"] is True and row["created_by"] == "operator:cli:ann"
    assert invoke(cli, "alerts", "test", alert_id).stdout == "delivered (HTTP 200)\n"
    assert sink.got[0].body["details"] == {"test": True}
    assert "muted until" in invoke(cli, "alerts", "mute", alert_id, "--for", "600").stdout
    assert get_alert(handle.store, alert_id).muted(handle.store.now())
    assert invoke(cli, "alerts", "delete", alert_id).stdout == "alert slow deleted\n"
    kinds = [e for e in handle.store.audit() if e.kind == EventKind.ALERT_CHANGED]
    assert len(kinds) == 4 and {e.actor for e in kinds} == {"operator:cli:ann"}


def test_errors_are_one_line(cli: CliRunner, sink: Sink) -> None:
    error_naming(
        invoke(cli, "alerts", "add", "x", "--when", "job_failed", "--webhook", "http://example.org/"),
        "webhook",
    )
    error_naming(
        invoke(cli, "alerts", "add", "x", "--when", "failure_rate", "--webhook", sink.url), "threshold"
    )
    error_naming(invoke(cli, "alerts", "delete", "nope"), "alert nope not found")
    error_naming(invoke(cli, "alerts", "mute", "nope", "--for", "5"), "alert nope not found")
    sink.status = 500
    alert_id = invoke(cli, "alerts", "add", "x", "--when", "job_failed", "--webhook", sink.url).stdout.strip()
    error_naming(invoke(cli, "alerts", "test", alert_id), "not delivered: HTTP 500")
