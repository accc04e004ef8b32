"""A missing or old schema is named in one line by every command and at web
start, on every store; ``db upgrade`` says what it did."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from leasehold.cli import leasehold
from store import open_store
from store.redis.layout import LAYOUT_VERSION
from store.sql import migrate
from store.sql.revision import head_revision
from tests.backends import REDIS_URL, delete_redis_prefix, redis_url_with_prefix
from tests.workers.procs import REPO

HINT = "run leasehold db upgrade"
COMMANDS = [
    ["stats"],
    ["enqueue", "noop"],
    ["worker", "--burst"],
    ["periodic", "list"],
    ["queue", "pause", "q"],
    ["purge"],
    ["recover"],
]


@pytest.fixture
def redis_prefix() -> Iterator[tuple[str, str]]:
    url, prefix = redis_url_with_prefix()
    try:
        yield url, prefix
    finally:
        delete_redis_prefix(url, prefix)


def invoke(url: str, *args: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    for name in [n for n in os.environ if n.startswith("LEASEHOLD_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("LEASEHOLD_STORE_URL", url)
    monkeypatch.setenv("LEASEHOLD_HANDLERS", "tests.handlers")
    result = CliRunner().invoke(leasehold, list(args), prog_name="leasehold")
    return result.exit_code, result.stdout, result.stderr


def web_start(url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEHOLD_")}
    env.update(PYTHONPATH=str(REPO), LEASEHOLD_STORE_URL=url, LEASEHOLD_SECRET_KEY="s" * 32)
    return subprocess.run(
        [sys.executable, "-c", "import leasehold.wsgi"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_every_command_and_the_web_name_a_missing_sql_schema(
    empty_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = f"Error: {empty_url} has no Leasehold schema: {HINT}"
    for args in COMMANDS:
        code, out, err = invoke(empty_url, *args, monkeypatch=monkeypatch)
        assert (code, out, err.strip().splitlines()) == (1, "", [line]), args
    web = web_start(empty_url)
    assert (web.returncode, web.stderr.strip().splitlines()) == (1, [line])
    code, out, _ = invoke(empty_url, "db", "upgrade", monkeypatch=monkeypatch)
    assert (code, out) == (0, f"created the schema at revision {head_revision()}\n")
    code, out, _ = invoke(empty_url, "db", "upgrade", monkeypatch=monkeypatch)
    assert (code, out) == (0, f"the schema is already at revision {head_revision()}\n")
    assert invoke(empty_url, "stats", monkeypatch=monkeypatch)[0] == 0


def test_an_old_sql_revision_is_named_and_upgraded(empty_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    head = head_revision()
    old = f"{int(head) - 1:04d}"
    migrate(empty_url, old)
    code, _, err = invoke(empty_url, "stats", monkeypatch=monkeypatch)
    assert (code, err) == (1, f"Error: {empty_url} has revision {old}, expected {head}: {HINT}\n")
    code, out, _ = invoke(empty_url, "db", "upgrade", monkeypatch=monkeypatch)
    assert (code, out) == (0, f"upgraded the schema from revision {old} to {head}\n")


def test_redis_names_a_layout_of_another_version(
    redis_prefix: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, prefix = redis_prefix
    code, out, _ = invoke(url, "db", "upgrade", monkeypatch=monkeypatch)
    assert (code, out) == (0, f"created the key layout at version {LAYOUT_VERSION}\n")
    code, out, _ = invoke(url, "db", "upgrade", monkeypatch=monkeypatch)
    assert (code, out) == (0, f"the key layout is already at version {LAYOUT_VERSION}\n")
    client = redis.Redis.from_url(REDIS_URL.split("?", 1)[0])
    client.set(f"{{{prefix}}}:layout", "0")
    line = f"Error: {url} has revision 0, expected {LAYOUT_VERSION}: {HINT}"
    for args in COMMANDS:
        code, out, err = invoke(url, *args, monkeypatch=monkeypatch)
        assert (code, out, err.strip().splitlines()) == (1, "", [line]), args
    web = web_start(url)
    assert (web.returncode, web.stderr.strip().splitlines()) == (1, [line])
    code, _, err = invoke(url, "db", "upgrade", monkeypatch=monkeypatch)
    assert code == 1 and "has key layout version 0" in err
    client.close()


def test_db_upgrade_shards_moves_the_namespace_and_the_old_url_says_so(
    redis_prefix: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``db upgrade --shards 3`` on the unsharded URL moves its jobs
    (store/redis/shards/reshard.py); every command on the old URL then
    names the fix in one line; the sharded URL serves the old job."""
    url, _ = redis_prefix
    with open_store(url) as store:
        job = store.enqueue("noop", None)
    code, out, err = invoke(url, "db", "upgrade", "--shards", "3", monkeypatch=monkeypatch)
    assert code == 0, err
    assert "onto 3 shards (1 jobs," in out and "shards=3 in the store URL" in out
    moved = f"Error: {url} was moved onto 3 shards: add shards=3 to the store URL\n"
    for args in (["stats"], ["db", "upgrade"]):
        code, _out, err = invoke(url, *args, monkeypatch=monkeypatch)
        assert (code, err) == (1, moved), args
    sharded = f"{url}&shards=3"
    code, out, err = invoke(sharded, "job", "show", job.id, monkeypatch=monkeypatch)
    assert code == 0 and job.id in out, err
    with open_store(sharded) as store:
        new = store.enqueue("noop", None)
    code, _out, err = invoke(sharded, "worker", "--burst", monkeypatch=monkeypatch)  # old and new jobs
    assert code == 0, err
    with open_store(sharded) as store:
        assert [store.get(i).status.name for i in (job.id, new.id)] == ["Completed", "Completed"]


def test_db_upgrade_shards_is_refused_on_sql(empty_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = invoke(empty_url, "db", "upgrade", "--shards", "3", monkeypatch=monkeypatch)
    assert (code, out, err) == (1, "", "Error: --shards splits a Redis store; this store is SQL\n")


def test_a_fresh_redis_deployment_needs_no_upgrade(redis_prefix: tuple[str, str]) -> None:
    """Redis has no DDL: the first check writes the current layout's version."""
    url, _ = redis_prefix
    from store.schema_version import check_schema

    with open_store(url) as store:
        check_schema(store)
        check_schema(store)


def test_gunicorn_stops_instead_of_restarting_workers(tmp_path: Path) -> None:
    """Served by gunicorn directly, a worker that finds no schema exits as a
    worker that failed to boot, so the master stops (no restart loop)."""
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEHOLD_")}
    env.update(PYTHONPATH=str(REPO), LEASEHOLD_STORE_URL=url, LEASEHOLD_SECRET_KEY="s" * 32)
    command = [sys.executable, "-m", "gunicorn", "-c", "python:webapp.gunicorn_conf", "-w", "2"]
    done = subprocess.run(
        [*command, "--bind", "127.0.0.1:0", "leasehold.wsgi:app"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    # Two workers and the master share one stderr pipe: a worker's line can
    # land after another process's unterminated output, so match the text,
    # not a whole line.
    assert f"Error: {url} has no Leasehold schema: {HINT}\n" in done.stderr
    assert "Worker failed to boot" in done.stderr
