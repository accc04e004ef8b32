"""The ``leasehold`` command: the same commands as
``flask --app wsgi``, settings from the environment, no Flask app built and
no LEASEHOLD_SECRET_KEY needed except by ``web``; ``purge`` in batches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from leasehold.cli import leasehold
from store.lifecycle import JobStatus
from store.sql.revision import head_revision
from tests.backends import StoreHandle
from tests.store.helpers import job_in
from tests.workers.procs import REPO
from tests.workers.test_cli import make_cli, one_line_error

S = JobStatus


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any LEASEHOLD_* variable, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEHOLD_")}
    env.update(extra)
    return env


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m leasehold.cli ARGS`` (the ``leasehold`` script) in a clean environment."""
    return subprocess.run(
        [sys.executable, "-m", "leasehold.cli", *args],
        cwd=REPO,
        env=clean_env(PYTHONPATH=str(REPO), **env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0 and done.stdout == "", done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    return lines[0]


@pytest.fixture
def cli(handle: StoreHandle, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    """In-process ``leasehold`` on the test's store, settings from the environment."""
    for name in [n for n in os.environ if n.startswith("LEASEHOLD_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("LEASEHOLD_STORE_URL", handle.url)
    monkeypatch.setenv("LEASEHOLD_HANDLERS", "tests.handlers")
    yield CliRunner()


def invoke(runner: CliRunner, *args: str) -> Result:
    return runner.invoke(leasehold, list(args), prog_name="leasehold")


def test_enqueue_stats_and_recover_without_a_secret_key(handle: StoreHandle, cli: CliRunner) -> None:
    assert "LEASEHOLD_SECRET_KEY" not in os.environ
    result = invoke(cli, "enqueue", "defaults", "--payload", '{"n": 1}')
    assert result.exit_code == 0, result.output
    job = handle.store.get(result.stdout.strip())
    assert (job.name, job.payload, job.queue, job.max_retries) == ("defaults", {"n": 1}, "special", 7)
    data = json.loads(invoke(cli, "stats", "--json").stdout)
    assert data["counts"]["Queued"] == 1 and data["queues"] == {"special": {"Queued": 1}}
    report = json.loads(invoke(cli, "recover", "--json").stdout)
    assert report["recovered"] == [] and report["owner"].startswith("cli:")


def test_purge_deletes_old_finished_jobs_in_batches(handle: StoreHandle, cli: CliRunner) -> None:
    finished = [job_in(handle.store, status).id for status in (S.Completed, S.Failed, S.Canceled)]
    waiting = job_in(handle.store, S.Queued)
    assert invoke(cli, "purge", "--older-than", "3600", "--dry-run").stdout == "0 job(s) would be purged\n"
    assert invoke(cli, "purge", "--older-than", "3600").stdout == "0 job(s) purged\n"
    assert invoke(cli, "purge", "--older-than", "0", "--dry-run").stdout == "3 job(s) would be purged\n"
    assert handle.store.counts().by_status["Completed"] == 1  # a dry run changes nothing
    result = invoke(cli, "purge", "--older-than", "0", "--status", "Completed", "--status", "Failed",
                    "--status", "Canceled")  # fmt: skip
    assert result.exit_code == 0 and result.stdout == "3 job(s) purged\n", result.output
    assert all(handle.store.counts().by_status[s.name] == 0 for s in (S.Completed, S.Failed, S.Canceled))
    assert handle.store.get(waiting.id).status is S.Queued
    assert [j.id for j in handle.store.list_jobs(status=S.Completed).items if j.id in finished] == []


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["purge", "--status", "Queued"], "--status"),
        (["purge", "--older-than", "-1"], "--older-than"),
        (["enqueue", "noop", "--payload", "{bad"], "--payload"),
        (["worker", "--queues", "a:x"], "--queues"),
        (["db", "downgrade"], "downgrade"),
        (["bogus"], "bogus"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    result = CliRunner().invoke(
        leasehold, args, env={"LEASEHOLD_STORE_URL": f"sqlite:///{tmp_path / 'unused.db'}"}
    )
    assert needle in one_line_error(result)


def test_flask_runs_the_same_purge(handle: StoreHandle) -> None:
    invoke_flask, close = make_cli(handle.url)
    try:
        job_in(handle.store, S.Completed)
        assert invoke_flask("purge", "--older-than", "0", "--dry-run").stdout == "1 job(s) would be purged\n"
        assert invoke_flask("purge", "--older-than", "0").stdout == "1 job(s) purged\n"
    finally:
        close()


# ------------------------------------------------------------ real processes
def test_real_process_db_upgrade_enqueue_stats_need_no_secret(tmp_path: Path) -> None:
    env = {"LEASEHOLD_STORE_URL": f"sqlite:///{tmp_path / 'jobs.db'}"}
    assert run("db", "upgrade", **env).stdout == f"created the schema at revision {head_revision()}\n"
    job_id = run("enqueue", "noop", **env).stdout.strip()
    assert len(job_id) == 36
    assert json.loads(run("stats", "--json", **env).stdout)["counts"]["Queued"] == 1


def test_real_process_bad_setting_is_one_line_naming_the_variable(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    assert "LEASEHOLD_LEASE_TTL" in one_line(
        run("stats", LEASEHOLD_STORE_URL=url, LEASEHOLD_LEASE_TTL="soon")
    )
    assert "LEASEHOLD_STORE_URL" in one_line(run("stats", LEASEHOLD_STORE_URL="mysql://h/db"))
    assert "--queues" in one_line(run("worker", "--queues", "a:x", LEASEHOLD_STORE_URL=url))


def test_real_process_web_without_a_secret_key_is_one_line(tmp_path: Path) -> None:
    done = run("web", LEASEHOLD_STORE_URL=f"sqlite:///{tmp_path / 'jobs.db'}")
    assert "LEASEHOLD_SECRET_KEY" in one_line(done)
