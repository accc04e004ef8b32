"""``ctx.log`` on every store: lines kept with the job's attempt, read back
through the API and the command, the cap (newest kept), NULs and long lines
made safe, written in batches (never one store call a line) and not at all
for a handler that logs nothing (its store calls counted); removed with
their job."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

import workers.job_log_book as book_module
from leasehold.cli import leasehold
from store.base import JobStore
from store.job_logs import MAX_LINE_CHARS, read_logs, sweep_logs
from store.lifecycle import JobStatus
from tests.backends import StoreHandle
from tests.web.conftest import VIEWER, api_app_for
from workers.config import WorkerConfig
from workers.handlers import load_handlers
from workers.worker import Worker

load_handlers(["tests.job_logs_handlers"])


def run_burst(handle: StoreHandle, **options: Any) -> None:
    config = WorkerConfig(
        store_url=handle.url,
        concurrency=options.pop("concurrency", 2),
        lease_ttl_s=5.0,
        name="w-logs",
        handlers=("tests.job_logs_handlers",),
        burst=True,
        store=handle.store.settings,
        **options,
    )
    assert Worker(config, handle.store, install_signals=False).run() == 0


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The worker's job-log writes: lines in each store call."""
    calls: list[int] = []
    real = book_module.append_logs

    def counted(store: JobStore, lines: Any, keep: int) -> None:
        calls.append(len(lines))
        real(store, lines, keep)

    monkeypatch.setattr(book_module, "append_logs", counted)
    yield calls


@pytest.fixture
def round_trips(handle: StoreHandle) -> Iterator[Counter[str]]:
    """Every call into the store, by name: its public methods (on SQL a job-log
    write is one ``tx``) and, on Redis, its client's commands and pipelines
    (a job-log write is one pipeline). The instance's attributes are wrapped
    to count and call through; the classes and the store's behaviour are untouched."""
    calls: Counter[str] = Counter()
    client = getattr(handle.store, "_client", None)
    targets = [(handle.store, [n for n in dir(type(handle.store)) if not n.startswith("_") and n != "now"])]
    if client is not None:
        targets.append((client, ["execute_command", "pipeline"]))
    wrapped = []
    for obj, names in targets:
        for name in names:
            method = getattr(obj, name, None)
            if not callable(method):
                continue

            def wrap(fn: Any, label: str) -> Any:
                def counted(*args: Any, **kwargs: Any) -> Any:
                    calls[label] += 1
                    return fn(*args, **kwargs)

                return counted

            setattr(obj, name, wrap(method, name))
            wrapped.append((obj, name))
    yield calls
    for obj, name in wrapped:
        delattr(obj, name)


def test_lines_by_attempt_through_the_api_and_the_command(
    handle: StoreHandle, writes: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = handle.store
    job = store.enqueue("log-then-fail-once", {})
    run_burst(handle)
    store.retry_now(job.id, actor="operator:test")  # due now: the second attempt
    run_burst(handle)
    assert store.get(job.id).status is JobStatus.Completed
    lines, next_after = read_logs(store, job.id)
    assert [(x["attempt"], x["level"]) for x in lines] == [
        (1, "INFO"),
        (1, "ERROR"),
        (2, "INFO"),
        (2, "INFO"),
    ]
    assert "KeyError: 'missing'" in lines[1]["message"] and lines[1]["message"].startswith(
        "first attempt fails"
    )
    app = api_app_for(handle)
    with app.test_client() as client:
        second = client.get(f"/api/jobs/{job.id}/logs?attempt=2", headers=VIEWER).json
        assert [x["message"] for x in second["lines"]] == ["attempt 2 starts", "attempt 2 done"]
        assert second["lines"][0]["at"].endswith("Z")
        first = client.get(f"/api/jobs/{job.id}/logs?limit=1", headers=VIEWER).json
        rest = client.get(f"/api/jobs/{job.id}/logs?after={first['next_after']}", headers=VIEWER).json
        assert [x["message"] for x in first["lines"] + rest["lines"]] == [x["message"] for x in lines]
        assert client.get(f"/api/jobs/{job.id}/logs?after={next_after}", headers=VIEWER).json["lines"] == []
        assert client.get(f"/api/jobs/{job.id}/logs?attempt=0", headers=VIEWER).status_code == 422
        missing = "0190c0de-0000-7000-8000-000000000000"
        assert client.get(f"/api/jobs/{missing}/logs", headers=VIEWER).status_code == 404
    for name in [n for n in os.environ if n.startswith("LEASEHOLD_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("LEASEHOLD_STORE_URL", handle.url)
    out = CliRunner().invoke(leasehold, ["job", "logs", job.id, "--attempt", "1"], prog_name="leasehold")
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines()[0].endswith("#1 INFO     attempt 1 starts")
    followed = CliRunner().invoke(
        leasehold, ["job", "logs", job.id, "--follow", "--json"], prog_name="leasehold"
    )
    assert [json.loads(x)["message"] for x in followed.stdout.splitlines()] == [x["message"] for x in lines]
    bad = CliRunner().invoke(leasehold, ["job", "logs", "nope"], prog_name="leasehold")
    assert bad.exit_code != 0 and bad.stderr.startswith("Error: ") and len(bad.stderr.splitlines()) == 1


def test_the_cap_keeps_the_newest_lines_and_lines_are_made_safe(
    handle: StoreHandle, writes: list[int]
) -> None:
    store = handle.store
    job = store.enqueue("log-many", {"n": 120})
    run_burst(handle, job_log_lines=50)
    lines, _ = read_logs(store, job.id)
    assert len(lines) == 50
    assert lines[0]["message"] == "line 00071" and lines[-2]["message"] == "line 00119"
    last = lines[-1]["message"]
    assert "\x00" not in last and "\ufffd" in last and len(last) == MAX_LINE_CHARS and last.endswith("…")
    assert len(writes) < 121 // 10  # in batches, never a call a line


def test_lines_are_written_in_batches(handle: StoreHandle, writes: list[int]) -> None:
    store = handle.store
    quiet = [store.enqueue("log-nothing", {}) for _ in range(6)]
    run_burst(handle)
    assert writes == []  # no job-log write at all
    assert all(read_logs(store, j.id)[0] == [] for j in quiet)
    loud = [store.enqueue("log-ten", {"tag": str(n)}) for n in range(6)]
    run_burst(handle)
    assert sum(writes) == 60 and len(writes) <= 6  # one call carries every line of an ack batch
    assert all(len(read_logs(store, j.id)[0]) == 10 for j in loud)


def test_a_handler_that_logs_nothing_makes_no_store_call(
    handle: StoreHandle, round_trips: Counter[str]
) -> None:
    """One job a burst (one slot, no recovery: the same claims and acks each
    time), its store calls counted: a handler that never reads ``ctx.log``,
    one that logs only below the logger's level, and one that configures its
    logger and logs nothing cost the same calls; ten lines cost a write more."""
    store = handle.store

    def calls_of_one(name: str) -> Counter[str]:
        job = store.enqueue(name, {})
        round_trips.clear()
        run_burst(handle, concurrency=1, recovery_enabled=False)
        counted = Counter(round_trips)
        assert store.get(job.id).status is JobStatus.Completed
        return counted

    calls_of_one("log-untouched")  # warm-up: the first burst also reads the catalogue
    untouched = calls_of_one("log-untouched")
    below_level = calls_of_one("log-nothing")
    silent = calls_of_one("log-silent")
    assert below_level == untouched, below_level - untouched
    assert silent == untouched, silent - untouched
    # The count sees a log write: ten lines are one more call (two if the
    # flusher's 0.5 s tick fell inside the run), and nothing else changes.
    loud = calls_of_one("log-ten")
    assert loud - untouched in ({"tx": 1}, {"tx": 2}, {"pipeline": 1}, {"pipeline": 2}), loud - untouched
    assert untouched - loud == Counter()


def test_lines_go_with_their_job(handle: StoreHandle) -> None:
    store = handle.store
    job = store.enqueue("log-ten", {})
    other = store.enqueue("log-ten", {})
    run_burst(handle)
    store.delete(job.id)
    sweep_logs(store)  # Redis: the maintenance sweep; SQL: gone with the row already
    store.clock_offset_s += 7200  # past the sweep's recheck
    sweep_logs(store)
    assert len(read_logs(store, other.id)[0]) == 10
    if handle.backend.startswith("redis"):
        client, keys = store._client, store.keys
        assert client.exists(keys.logs(job.id, 1), keys.logs_meta(job.id)) == 0
        assert client.exists(keys.logs(other.id, 1)) == 1
    else:
        from sqlalchemy import func, select

        from store.sql.schema import job_logs

        count = store.tx(lambda c: c.execute(select(func.count()).select_from(job_logs)).scalar_one())
        assert count == 10
