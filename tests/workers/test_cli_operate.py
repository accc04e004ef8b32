"""The operating commands: ``periodic list|enable|
disable|run``, ``queue pause|resume``, ``purge --status`` with any subset and
a counted dry run, ``enqueue --unique-for/--unique-key``; one-line errors;
the same commands under ``flask --app wsgi``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from click.testing import CliRunner, Result

from leasehold.cli import leasehold
from store.lifecycle import JobStatus
from store.models import Schedule
from tests.backends import StoreHandle
from tests.store.helpers import job_in
from tests.workers.test_cli import make_cli, one_line_error
from workers.scheduler import SCHEDULE_HEADER

S = JobStatus
NIGHTLY = Schedule("nightly", "noop", "0 3 * * *", "Europe/Paris", "reports", {"full": True})


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


def test_periodic_list_enable_disable_run(handle: StoreHandle, cli: CliRunner) -> None:
    assert "no periodic jobs" in invoke(cli, "periodic", "list").stdout
    handle.store.save_schedules([NIGHTLY])
    out = invoke(cli, "periodic", "list").stdout
    assert "nightly  [enabled]  At 03:00, every day (0 3 * * *, Europe/Paris)" in out
    assert "next run 20" in out and "last job none" in out
    [row] = json.loads(invoke(cli, "periodic", "list", "--json").stdout)
    assert row["next_run_at"].endswith(("+01:00", "+02:00")) and 0 < row["next_run_in_s"] <= 86400 + 3600

    assert invoke(cli, "periodic", "disable", "nightly").stdout == "periodic job nightly disabled\n"
    assert handle.store.schedules()[0].enabled is False
    assert "[DISABLED]" in invoke(cli, "periodic", "list").stdout
    assert invoke(cli, "periodic", "enable", "nightly").stdout == "periodic job nightly enabled\n"

    result = invoke(cli, "periodic", "run", "nightly")
    assert result.exit_code == 0, result.output
    job = handle.store.get(result.stdout.strip())
    assert (job.name, job.queue, job.payload) == ("noop", "reports", {"full": True})
    assert job.headers == {SCHEDULE_HEADER: "nightly"}

    handle.store.record_tick("nightly", handle.store.now(), job.id)
    [row] = json.loads(invoke(cli, "periodic", "list", "--json").stdout)
    assert (row["last_job_id"], row["last_job_status"]) == (job.id, "Queued")


def test_periodic_errors_are_one_line(handle: StoreHandle, cli: CliRunner) -> None:
    assert "'nope'" in one_line_error(invoke(cli, "periodic", "enable", "nope"))
    assert "'nope'" in one_line_error(invoke(cli, "periodic", "run", "nope"))
    assert "bogus" in one_line_error(invoke(cli, "periodic", "bogus"))


def test_queue_pause_and_resume(handle: StoreHandle, cli: CliRunner) -> None:
    job = handle.store.enqueue("noop", None, queue="mail")
    assert invoke(cli, "queue", "pause", "mail").stdout == "queue mail paused by operator:cli:ann\n"
    assert handle.store.claim("w", ["mail"], 5) == []
    assert invoke(cli, "queue", "resume", "mail").stdout == "queue mail resumed by operator:cli:ann\n"
    assert [j.id for j in handle.store.claim("w", ["mail"], 5)] == [job.id]
    assert [e.actor for e in handle.store.audit()][:2] == ["operator:cli:ann", "operator:cli:ann"]
    assert "QUEUE" in one_line_error(invoke(cli, "queue", "pause"))


def test_purge_by_any_subset_of_statuses_with_a_counted_dry_run(handle: StoreHandle, cli: CliRunner) -> None:
    for status in (S.Completed, S.Completed, S.Failed, S.Canceled):
        job_in(handle.store, status)
    args = ("purge", "--older-than", "0")
    assert invoke(cli, *args, "--status", "Failed", "--dry-run").stdout == "1 job(s) would be purged\n"
    assert invoke(cli, *args, "--status", "Completed", "--status", "Canceled", "--dry-run").stdout == (
        "3 job(s) would be purged\n"
    )
    assert invoke(cli, *args, "--status", "Completed").stdout == "2 job(s) purged\n"
    counts = handle.store.counts().by_status
    assert (counts["Completed"], counts["Failed"], counts["Canceled"]) == (0, 1, 1)
    assert invoke(cli, *args, "--dry-run").stdout == "2 job(s) would be purged\n"
    assert "--status" in one_line_error(invoke(cli, *args, "--status", "InProgress"))


def test_enqueue_unique(handle: StoreHandle, cli: CliRunner) -> None:
    first = invoke(cli, "enqueue", "noop", "--payload", '{"day": 1}', "--unique-for", "60").stdout
    again = invoke(cli, "enqueue", "noop", "--payload", '{"day": 1}', "--unique-for", "60").stdout
    other = invoke(cli, "enqueue", "noop", "--payload", '{"day": 2}', "--unique-for", "60").stdout
    assert first == again != other and len(first.strip()) == 36
    keyed = {
        invoke(cli, "enqueue", "noop", "--unique-key", "sync:acme", "--payload", f'{{"n": {n}}}').stdout
        for n in range(3)
    }
    assert len(keyed) == 1
    assert "--unique-for" in one_line_error(invoke(cli, "enqueue", "noop", "--unique-for", "-1"))
    assert "unique_key" in one_line_error(invoke(cli, "enqueue", "noop", "--unique-key", " "))


def test_flask_runs_the_same_commands(handle: StoreHandle) -> None:
    invoke_flask, close = make_cli(handle.url)
    try:
        handle.store.save_schedules([NIGHTLY])
        assert invoke_flask("periodic", "disable", "nightly").stdout == "periodic job nightly disabled\n"
        assert "paused by operator:" in invoke_flask("queue", "pause", "mail").stdout
        job_in(handle.store, S.Failed)
        assert invoke_flask("purge", "--older-than", "0", "--status", "Failed").stdout == "1 job(s) purged\n"
    finally:
        close()
