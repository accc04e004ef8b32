"""``leasehold`` acts on jobs: ``--version``; ``job show|cancel|requeue|retry|delete
ID``; the same on a filter as a bulk operation (count previewed, ``--yes``,
followed to its end and run by the command when no worker does); ``queue
list``; ``enqueue --idempotency-key`` and ``existing job``; ``stats`` marks
paused queues; ``periodic list`` gives a disabled schedule no next run.
Exit codes: 0 done, 1 refused, 2 bad usage."""

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

S = JobStatus


@pytest.fixture
def cli(handle: StoreHandle, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    for name in [n for n in os.environ if n.startswith("LEASEHOLD_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("LEASEHOLD_STORE_URL", handle.url)
    monkeypatch.setenv("LEASEHOLD_HANDLERS", "tests.handlers")
    yield CliRunner()


def invoke(runner: CliRunner, *args: str, input: str | None = None) -> Result:
    return runner.invoke(leasehold, list(args), prog_name="leasehold", input=input)


def test_version(cli: CliRunner) -> None:
    result = invoke(cli, "--version")
    assert result.exit_code == 0 and result.stdout.startswith("leasehold ")


def test_show_and_act_on_one_job(handle: StoreHandle, cli: CliRunner) -> None:
    store = handle.store
    failed = job_in(store, S.Failed)
    shown = invoke(cli, "job", "show", failed.id, "--json")
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert (data["id"], data["status"]) == (failed.id, "Failed") and len(data["attempts"]) == 1
    assert invoke(cli, "job", "show", failed.id).stdout.startswith(
        f"{failed.id}  t  queue=default  status=Failed"
    )

    retried = invoke(cli, "job", "retry", failed.id, "--json")
    assert retried.exit_code == 0 and json.loads(retried.stdout)["status"] == "Queued"
    assert invoke(cli, "job", "cancel", failed.id).stdout == f"{failed.id} Canceled\n"
    assert invoke(cli, "job", "requeue", failed.id).stdout == f"{failed.id} Queued\n"
    assert store.get(failed.id).status is S.Queued
    assert invoke(cli, "job", "delete", failed.id).stdout == f"{failed.id} deleted\n"

    missing = invoke(cli, "job", "show", failed.id)
    assert missing.exit_code == 1 and "not found" in missing.stderr
    running = job_in(store, S.InProgress)
    refused = invoke(cli, "job", "retry", running.id)
    assert refused.exit_code == 1 and refused.stderr.startswith("Error: ")
    assert store.get(running.id).status is S.InProgress


def test_bad_usage_exits_2(cli: CliRunner) -> None:
    assert invoke(cli, "job", "retry").exit_code == 2
    assert invoke(cli, "job", "retry", "some-id", "--status", "Failed").exit_code == 2
    assert invoke(cli, "job", "retry", "--status", "Broken").exit_code == 2


def test_bulk_retry_previews_asks_and_finishes_without_a_worker(handle: StoreHandle, cli: CliRunner) -> None:
    store = handle.store
    failed = [job_in(store, S.Failed, queue="mail") for _ in range(3)]
    other = job_in(store, S.Failed, queue="other")

    declined = invoke(cli, "job", "retry", "--status", "Failed", "--queue", "mail", input="n\n")
    assert declined.exit_code == 1
    assert "retry: 3 job(s) match (status=Failed, queue=mail)" in declined.stdout
    assert all(store.get(j.id).status is S.Failed for j in failed)

    done = invoke(cli, "job", "retry", "--status", "Failed", "--queue", "mail", "--yes")
    assert done.exit_code == 0, done.output
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "retry: 3 job(s) match (status=Failed, queue=mail)"
    assert lines[-1].endswith(": done, 3 changed, 0 skipped of 3")
    assert all(store.get(j.id).status is S.Queued for j in failed)
    assert store.get(other.id).status is S.Failed
    [operation] = store.operations(limit=5)
    assert operation.state == "done" and operation.actor.startswith("operator:")


def test_bulk_json_prints_the_finished_operation(handle: StoreHandle, cli: CliRunner) -> None:
    job_in(handle.store, S.Queued, queue="q")
    done = invoke(cli, "job", "cancel", "--queue", "q", "--yes", "--json")
    assert done.exit_code == 0, done.output
    operation = json.loads(done.stdout)
    assert (operation["state"], operation["changed"], operation["progress"]) == ("done", 1, 1.0)


def test_queue_list_and_stats_mark_paused_queues(handle: StoreHandle, cli: CliRunner) -> None:
    job_in(handle.store, S.Queued, queue="mail")
    job_in(handle.store, S.Queued, queue="web")
    handle.store.pause_queue("mail", actor="operator:ann")
    rows = json.loads(invoke(cli, "queue", "list", "--json").stdout)
    assert [(r["name"], r["paused"], r["counts"]["Queued"]) for r in rows] == [
        ("mail", True, 1),
        ("web", False, 1),
    ]
    text = invoke(cli, "queue", "list").stdout.splitlines()
    assert text[1].split()[:2] == ["mail", "paused"] and text[1].split()[3] == "1"
    stats = invoke(cli, "stats").stdout
    assert "mail (paused)" in stats and "web (paused)" not in stats
    assert json.loads(invoke(cli, "stats", "--json").stdout)["paused"] == ["mail"]


def test_enqueue_idempotency_key_and_existing_job(handle: StoreHandle, cli: CliRunner) -> None:
    first = invoke(cli, "enqueue", "noop", "--idempotency-key", "k-1")
    assert first.exit_code == 0 and first.stderr == ""
    again = invoke(cli, "enqueue", "noop", "--idempotency-key", "k-1")
    assert again.exit_code == 0
    assert again.stdout == first.stdout  # the id alone
    assert again.stderr.startswith(f"existing job {first.stdout.strip()}")
    unique = [invoke(cli, "enqueue", "noop", "--unique-for", "60") for _ in range(2)]
    assert unique[0].stdout == unique[1].stdout and "existing job" in unique[1].stderr


def test_periodic_list_gives_a_disabled_schedule_no_next_run(handle: StoreHandle, cli: CliRunner) -> None:
    handle.store.save_schedules([Schedule("nightly", "noop", "0 3 * * *")])
    assert json.loads(invoke(cli, "periodic", "list", "--json").stdout)[0]["next_run_at"] is not None
    handle.store.set_schedule_enabled("nightly", False)
    row = json.loads(invoke(cli, "periodic", "list", "--json").stdout)[0]
    assert (row["next_run_at"], row["next_run_in_s"]) == (None, None)
    assert "next run never" in invoke(cli, "periodic", "list").stdout


def test_show_counts_the_attempts_a_job_ran(handle: StoreHandle, cli: CliRunner) -> None:
    store = handle.store
    done = job_in(store, S.Completed, max_retries=5)
    assert "  attempts 1 of 6" in invoke(cli, "job", "show", done.id).stdout.splitlines()
    waiting = store.enqueue("t", None, queue="other", max_retries=5)
    assert "  attempts 0 of 6" in invoke(cli, "job", "show", waiting.id).stdout.splitlines()
    [running] = store.claim("w", ["other"], 1)
    assert "  attempts 1 of 6" in invoke(cli, "job", "show", running.id).stdout.splitlines()
    retried = store.fail(running.id, running.lease_token, {"type": "E", "message": "m", "traceback": None})
    assert retried.status is S.Scheduled
    assert "  attempts 1 of 6" in invoke(cli, "job", "show", running.id).stdout.splitlines()


def test_show_escapes_terminal_control_sequences(handle: StoreHandle, cli: CliRunner) -> None:
    store = handle.store
    job = store.enqueue("t", None, queue="evil")
    [claimed] = store.claim("w\x1b]0;owned\x07", ["evil"], 1)
    message = "boom\x1b[2J\x1b[31mred\r\nfake line\u202egnp"
    store.fail(
        job.id,
        claimed.lease_token,
        {"type": "E\x1b[0m", "message": message, "traceback": None},
        permanent=True,
    )
    shown = invoke(cli, "job", "show", job.id)
    assert shown.exit_code == 0, shown.output
    assert "\x1b" not in shown.stdout and "\r" not in shown.stdout and "\u202e" not in shown.stdout
    assert (
        "  error E\\x1b[0m: boom\\x1b[2J\\x1b[31mred\\x0d\\x0afake line\\u202egnp"
        in shown.stdout.splitlines()
    )


def test_periodic_commands_take_a_name_with_a_slash(handle: StoreHandle, cli: CliRunner) -> None:
    store = handle.store
    store.save_schedules([Schedule("reports/daily", "noop", "0 3 * * *", "UTC", "reports", {})])
    done = invoke(cli, "periodic", "disable", "reports/daily")
    assert done.exit_code == 0 and done.stdout.strip() == "periodic job reports/daily disabled", done.output
    assert invoke(cli, "periodic", "enable", "reports/daily").exit_code == 0
    run = invoke(cli, "periodic", "run", "reports/daily")
    assert run.exit_code == 0 and store.get(run.stdout.strip()).queue == "reports"
