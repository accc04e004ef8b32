"""The CLI commands: in-process through Flask's CLI runner on every backend,
plus real ``flask --app wsgi`` processes for exit codes and stderr."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import Result
from werkzeug.security import check_password_hash

from leasehold.cli.flask import create_cli_app
from store import open_store
from tests.backends import StoreHandle
from tests.workers.procs import Spawner, wait_until

Invoke = Callable[..., Result]


def make_cli(store_url: str) -> tuple[Invoke, Callable[[], None]]:
    app = create_cli_app(
        {
            "STORE_URL": store_url,
            "HANDLERS": "tests.handlers",
            "SECRET_KEY": "cli-tests-0123456789abcdef0123456789",
            "RECOVERY_LOCK_TTL": 5,
            "RECOVERY_INTERVAL": 0.2,
            "RETRY_BASE": 0.05,
            "RETRY_MAX_DELAY": 1,
        }
    )
    runner = app.test_cli_runner()

    def invoke(*args: str, input: str | None = None) -> Result:
        return runner.invoke(args=list(args), input=input)

    return invoke, app.extensions["leasehold"].close


@pytest.fixture
def cli(handle: StoreHandle) -> Iterator[Invoke]:
    invoke, close = make_cli(handle.url)
    yield invoke
    close()


@pytest.fixture(scope="module")
def plain_cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Invoke]:
    """For commands whose store does not matter (bad input, hash-password): one
    app for the module, on a SQLite file that is never created."""
    invoke, close = make_cli(f"sqlite:///{tmp_path_factory.mktemp('cli') / 'unused.db'}")
    yield invoke
    close()


def one_line_error(result: Result) -> str:
    assert result.exit_code != 0, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ") and "Traceback" not in result.stderr
    return lines[0]


def test_enqueue_prints_the_new_id_alone(handle: StoreHandle, cli: Invoke) -> None:
    result = cli(
        "enqueue", "noop", "--payload", '{"x": [1, 2]}', "--queue", "q1", "--priority", "5",
        "--max-retries", "2", "--timeout", "30",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    job_id = result.stdout.strip()
    assert result.stdout == f"{job_id}\n" and str(uuid.UUID(job_id)) == job_id
    job = handle.store.get(job_id)
    assert (job.name, job.payload, job.queue, job.priority) == ("noop", {"x": [1, 2]}, "q1", 5)
    assert (job.max_retries, job.timeout_seconds, job.status.name) == (2, 30.0, "Queued")

    delayed = handle.store.get(cli("enqueue", "noop", "--delay", "60").stdout.strip())
    assert delayed.status.name == "Scheduled" and delayed.payload is None
    now = handle.store.now()
    at = datetime.fromtimestamp(round(now) + 600, UTC).isoformat()
    timed = handle.store.get(cli("enqueue", "noop", "--at", at, "--expires-in", "900").stdout.strip())
    assert timed.status.name == "Scheduled" and timed.retry_delay_until.timestamp() >= round(now) + 600
    assert timed.expires_at is not None and 890 < timed.expires_at.timestamp() - now < 910
    # --run-at is kept as the same option as --at (scripts written before --at still work).
    aliased = handle.store.get(cli("enqueue", "noop", "--run-at", at).stdout.strip())
    assert abs(aliased.retry_delay_until.timestamp() - timed.retry_delay_until.timestamp()) < 0.01
    # A registered handler's decorator options are the defaults.
    defaults = handle.store.get(cli("enqueue", "defaults").stdout.strip())
    assert (defaults.queue, defaults.max_retries, defaults.timeout_seconds) == ("special", 7, 42.0)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["enqueue", "noop", "--payload", "{bad"], "--payload"),
        (["enqueue", "noop", "--max-retries", "-1"], "--max-retries"),
        (["enqueue", "noop", "--priority", "high"], "--priority"),
        (["enqueue", "noop", "--at", "2030-01-01T09:00:00"], "--at"),  # which clock?
        (["enqueue", "noop", "--run-at", "tomorrow"], "--run-at"),
        (["enqueue", "noop", "--expires-at", "soon"], "--expires-at"),
        (["enqueue", "noop", "--expires-in", "0"], "--expires-in"),
        (["enqueue"], "NAME"),
        (["worker", "--queues", "a:x"], "--queues"),
        (["worker", "--queues", "a:0"], "--queues"),
        (["worker", "--queues", "a,,b"], "--queues"),
        (["worker", "--queues", "a,a:2"], "--queues"),
        (["worker", "--concurrency", "0"], "--concurrency"),
        (["worker", "--pool", "fork"], "--pool"),
        (["worker", "--lease-ttl", "0.01"], "--lease-ttl"),
        (["recover", "--dry-run", "--bogus"], "--bogus"),
        (["db", "downgrade"], "downgrade"),
        (["hash-password", "--password", ""], "--password"),
    ],
)
def test_bad_input_is_one_line_on_stderr(plain_cli: Invoke, args: list[str], needle: str) -> None:
    assert needle in one_line_error(plain_cli(*args))


def test_stats_json_and_table(handle: StoreHandle, cli: Invoke) -> None:
    handle.store.enqueue("noop", queue="a")
    handle.store.enqueue("noop", queue="b", delay_s=60)
    data = json.loads(cli("stats", "--json").stdout)
    assert set(data) == {"counts", "queues", "paused"} and data["paused"] == []
    names = {"Queued", "Scheduled", "InProgress", "Completed", "Failed", "Canceled"}
    assert set(data["counts"]) == names
    assert data["counts"]["Queued"] == 1 and data["counts"]["Scheduled"] == 1
    assert data["queues"] == {"a": {"Queued": 1}, "b": {"Scheduled": 1}}
    table = cli("stats").stdout.splitlines()
    assert table[0].split() == ["queue", *[n for n in data["counts"]]]
    assert table[-1].split()[0] == "total"


def test_recover_dry_run_changes_nothing_then_recover_does(handle: StoreHandle, cli: Invoke) -> None:
    store = handle.store
    job = store.enqueue("noop")
    [claimed] = store.claim("w-gone", ["default"], 1, lease_ttl_s=0.1)
    wait_until(lambda: store.expired_lease_count() == 1, what="the lease to expire")

    preview = json.loads(cli("recover", "--dry-run", "--json").stdout)
    assert preview["dry_run"] is True and preview["failed"] == []
    assert [r["id"] for r in preview["recovered"]] == [job.id]
    assert preview["recovered"][0]["worker_id"] == "w-gone"
    still = store.get(job.id)
    assert (still.status.name, still.lease_token) == ("InProgress", claimed.lease_token)
    assert store.recovery_runs() == [] and store.expired_lease_count() == 1
    text = cli("recover", "--dry-run").stdout.splitlines()
    assert text[0] == "1 job(s) would be rescheduled, 0 would be failed"
    assert text[1].split()[:2] == [job.id, "noop"] and text[1].endswith("-> Scheduled")
    assert store.recovery_runs() == []

    report = json.loads(cli("recover", "--json").stdout)
    assert report["dry_run"] is False and [r["id"] for r in report["recovered"]] == [job.id]
    assert report["owner"].startswith("cli:")
    after = store.get(job.id)
    assert (after.status.name, after.retry_count, after.lease_expirations) == ("Scheduled", 1, 1)
    [run] = store.recovery_runs()
    assert (run.trigger, run.recovered, run.failed) == ("cli", 1, 0)
    assert store.lock_info("recovery").owner is None  # released after the run

    text = cli("recover").stdout
    assert text.startswith("0 job(s) were rescheduled, 0 were failed")


def test_hash_password_prints_a_verifiable_hash(plain_cli: Invoke) -> None:
    result = plain_cli("hash-password", "--password", "s3cret")
    assert result.exit_code == 0
    assert check_password_hash(result.stdout.strip(), "s3cret")
    prompted = plain_cli("hash-password", input="other\nother\n")
    assert prompted.exit_code == 0
    assert check_password_hash(prompted.stdout.strip().splitlines()[-1], "other")


def test_db_upgrade_creates_the_schema(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    invoke, close = make_cli(url)
    try:
        result = invoke("db", "upgrade")
        assert result.exit_code == 0, result.output
        assert result.stdout.strip().startswith("created the schema at revision ")
        again = invoke("db", "upgrade")  # idempotent
        assert again.exit_code == 0 and again.stdout.strip().startswith("the schema is already at revision")
    finally:
        close()
    with open_store(url) as store:
        assert store.get(store.enqueue("noop").id).status.name == "Queued"


# ------------------------------------------------------------ real processes
def test_real_process_bad_input_exits_non_zero_with_one_line(tmp_path: Path) -> None:
    spawn = Spawner(f"sqlite:///{tmp_path / 'jobs.db'}", tmp_path)
    for args in (["enqueue", "noop", "--payload", "{bad"], ["worker", "--queues", "a:x"]):
        done = spawn.flask(*args)
        assert done.returncode != 0 and done.stdout == ""
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert done.stderr.startswith("Error: ")


def test_real_process_unknown_store_scheme_exits_with_one_line(tmp_path: Path) -> None:
    spawn = Spawner("mysql://localhost/jobs", tmp_path)
    done = spawn.flask("stats")
    assert done.returncode != 0 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "scheme" in done.stderr
