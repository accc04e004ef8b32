"""``leasehold queue limits`` and the enqueue flags of flow control."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from click.testing import CliRunner, Result

from leasehold.cli import leasehold
from store.flow_rules import QueueLimits, Rate
from store.lifecycle import EventKind, JobStatus
from tests.backends import StoreHandle
from tests.conftest import handle_fixture

handle = handle_fixture(["sqlite", "postgresql"])


@pytest.fixture
def cli(handle: StoreHandle, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    for name in [n for n in os.environ if n.startswith("LEASEHOLD_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("LEASEHOLD_STORE_URL", handle.url)
    monkeypatch.setenv("LEASEHOLD_HANDLERS", "tests.handlers")
    monkeypatch.setenv("USER", "ann")
    yield CliRunner()


def invoke(runner: CliRunner, *args: str) -> Result:
    return runner.invoke(leasehold, list(args), prog_name="leasehold")


def test_queue_limits_set_show_clear(handle: StoreHandle, cli: CliRunner) -> None:
    store = handle.store
    done = invoke(cli, "queue", "limits", "mail", "--concurrency", "3", "--rate", "10/2")
    assert done.exit_code == 0, done.output
    assert (
        done.stdout.strip() == "queue mail: concurrency 3, per-key concurrency -, rate 10/2s, per-key rate -"
    )
    assert store.queue_limits() == {"mail": QueueLimits(concurrency=3, rate=Rate(10, 2.0))}
    assert (store.audit(1)[0].kind, store.audit(1)[0].actor) == (
        EventKind.QUEUE_LIMITS_SET,
        "operator:cli:ann",
    )
    done = invoke(cli, "queue", "limits", "mail", "--per-key-rate", "1/60", "--json")
    assert json.loads(done.stdout)["per_key_rate"] == {"limit": 1, "period_s": 60.0}
    assert json.loads(done.stdout)["concurrency"] == 3
    done = invoke(cli, "queue", "limits", "mail", "--clear", "--per-key-concurrency", "2")
    assert store.queue_limits() == {"mail": QueueLimits(per_key_concurrency=2)}
    invoke(cli, "queue", "limits", "mail", "--clear")
    assert store.queue_limits() == {}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--concurrency", "0"], "--concurrency"),
        (["--rate", "ten"], "--rate"),
        (["--rate", "5/0"], "--rate"),
    ],
)
def test_queue_limits_bad_input(handle: StoreHandle, cli: CliRunner, args: list[str], needle: str) -> None:
    done = invoke(cli, "queue", "limits", "mail", *args)
    assert done.exit_code == 2 and needle in done.output
    assert handle.store.queue_limits() == {}


def test_enqueue_with_limit_key_and_dependencies(handle: StoreHandle, cli: CliRunner) -> None:
    parent = invoke(cli, "enqueue", "noop", "--limit-key", "acme").stdout.strip()
    assert handle.store.get(parent).limit_key == "acme"
    done = invoke(cli, "enqueue", "noop", "--depends-on", parent, "--on-parent-failure", "run")
    assert done.exit_code == 0, done.output
    child = handle.store.get(done.stdout.strip())
    assert (child.status, child.pending_parents, child.on_parent_failure) == (JobStatus.Scheduled, 1, "run")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--concurrency", "²"], "--concurrency"),
        (["--concurrency", "9" * 5000], "--concurrency"),
        (["--concurrency", "99999999999999999999999"], "--concurrency"),
        (["--per-key-concurrency", "1000001"], "--per-key-concurrency"),
        (["--rate", "99999999999/1"], "--rate"),
        (["--rate", "5/inf"], "--rate"),
    ],
)
def test_queue_limits_refuses_values_past_the_rule_on_one_line(
    handle: StoreHandle, cli: CliRunner, args: list[str], needle: str
) -> None:
    done = invoke(cli, "queue", "limits", "mail", *args)
    assert done.exit_code == 2 and needle in done.output
    assert len(done.output.strip().splitlines()) == 1 and "Traceback" not in done.output
    assert handle.store.queue_limits() == {}


def test_queue_limits_refuses_a_queue_name_with_nul(handle: StoreHandle, cli: CliRunner) -> None:
    done = invoke(cli, "queue", "limits", "a\x00b", "--concurrency", "1")
    assert done.exit_code == 1 and done.output.strip() == "Error: queue: must not contain NUL characters"
    assert handle.store.queue_limits() == {}


def test_a_bad_stored_value_is_named_and_breaks_no_other_queue(handle: StoreHandle, cli: CliRunner) -> None:
    from tests.store.test_contract_limit_values import write_bad_limits

    write_bad_limits(handle, "bad")
    done = invoke(cli, "queue", "limits", "other", "--concurrency", "4")
    assert done.exit_code == 0, done.output
    assert handle.store.queue_limits()["other"] == QueueLimits(concurrency=4)
    shown = invoke(cli, "queue", "limits", "bad")
    assert shown.exit_code == 0
    assert (
        shown.stdout.strip() == "queue bad: concurrency -, per-key concurrency -, rate 5/60s, per-key rate -"
    )
    assert shown.stderr.startswith("Warning: queue bad: concurrency: must be within [1, 1000000]")
    fixed = invoke(cli, "queue", "limits", "bad", "--concurrency", "2")
    assert fixed.exit_code == 0 and fixed.stderr == ""
    assert handle.store.queue_limits()["bad"] == QueueLimits(concurrency=2, rate=Rate(5, 60.0))
