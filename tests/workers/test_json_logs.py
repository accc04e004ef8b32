"""LEASEHOLD_LOG_FORMAT=json: a real worker logs one JSON object per line,
its job records carrying job_id, worker_id and queue; no secret reaches a line."""

from __future__ import annotations

import json
import logging
import logging.config
from pathlib import Path

from leasehold.logs import formatter, gunicorn_logconfig
from tests.workers.test_leasehold_cli import one_line, run

SECRET = "s3cret-console-key-never-logged-0123"


def test_worker_logs_json_lines_with_job_fields(tmp_path: Path) -> None:
    env = {"LEASEHOLD_STORE_URL": f"sqlite:///{tmp_path / 'jobs.db'}", "LEASEHOLD_HANDLERS": "tests.handlers"}
    assert run("db", "upgrade", **env).returncode == 0
    job_id = run("enqueue", "permanent", "--queue", "mail", **env).stdout.strip()
    done = run(
        "worker", "--burst", "--queues", "mail", "--log-level", "debug", "--concurrency", "1",
        LEASEHOLD_LOG_FORMAT="json", LEASEHOLD_SECRET_KEY=SECRET, **env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.strip()]
    assert lines and all({"time", "level", "logger", "message"} <= set(r) for r in lines)
    mine = [r for r in lines if r.get("job_id") == job_id]
    assert {r["queue"] for r in mine} == {"mail"} and len({r["worker_id"] for r in mine}) == 1
    assert any("failed for good" in r["message"] and r["level"] == "ERROR" for r in mine), mine
    assert SECRET not in done.stderr and SECRET not in done.stdout


def test_bad_log_format_is_one_line_naming_the_variable(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    assert "LEASEHOLD_LOG_FORMAT" in one_line(
        run("stats", LEASEHOLD_STORE_URL=url, LEASEHOLD_LOG_FORMAT="xml")
    )


def test_json_formatter_and_gunicorn_config() -> None:
    record = logging.LogRecord("leasehold.x", logging.INFO, __file__, 1, "job %s done", ("j1",), None)
    record.job_id = "j1"
    line = json.loads(formatter("json").format(record))
    assert line["message"] == "job j1 done" and line["job_id"] == "j1" and line["level"] == "INFO"
    assert gunicorn_logconfig("text") is None
    config = gunicorn_logconfig("json", "warning")
    assert config is not None and config["loggers"]["gunicorn.error"]["level"] == "WARNING"
    logging.config.dictConfig({**config, "root": {"level": "INFO", "handlers": []}, "loggers": {}})
