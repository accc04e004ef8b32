"""A run's outcome in the worker's log: a failed attempt at WARNING, a final
failure at ERROR (handler, job id, attempt, message and traceback), a success
at INFO with its run time unless LEASEHOLD_LOG_SUCCESS is false; the same
fields in the JSON format."""

from __future__ import annotations

import json
from pathlib import Path

from tests.workers.test_leasehold_cli import run


def _worker(tmp_path: Path, log_format: str, **extra: str) -> tuple[dict[str, str], str]:
    env = {
        "LEASEHOLD_STORE_URL": f"sqlite:///{tmp_path / 'jobs.db'}",
        "LEASEHOLD_HANDLERS": "tests.handlers",
        "LEASEHOLD_RETRY_BASE": "0",  # the retry is due at once: the burst worker runs it
        **extra,
    }
    assert run("db", "upgrade", **env).returncode == 0
    ids = {
        "boom": run("enqueue", "boom", "--max-retries", "1", **env).stdout.strip(),
        "noop": run("enqueue", "noop", **env).stdout.strip(),
    }
    done = run("worker", "--burst", "--concurrency", "1", LEASEHOLD_LOG_FORMAT=log_format, **env)
    assert done.returncode == 0, done.stderr
    return ids, done.stderr


def test_json_lines_carry_attempt_message_and_traceback(tmp_path: Path) -> None:
    ids, stderr = _worker(tmp_path, "json")
    lines = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    boom = [r for r in lines if r.get("job_id") == ids["boom"] and "error_type" in r]
    assert [(r["level"], r["attempt"]) for r in boom] == [("WARNING", 1), ("ERROR", 2)], boom
    for r in boom:
        assert (r["handler"], r["error_type"], r["error_message"]) == ("boom", "ValueError", "boom")
        assert 'raise ValueError("boom")' in r["traceback"] and r["worker_id"] and r["queue"] == "default"
    assert "retry 1 of 1" in boom[0]["message"] and "failed for good" in boom[1]["message"]
    [ok] = [r for r in lines if r.get("job_id") == ids["noop"] and r["level"] == "INFO"]
    assert ok["handler"] == "noop" and ok["attempt"] == 1 and 0 <= ok["run_time_s"] < 5
    assert "succeeded in" in ok["message"]


def test_text_lines_print_the_traceback_and_success_can_be_quiet(tmp_path: Path) -> None:
    ids, stderr = _worker(tmp_path, "text", LEASEHOLD_LOG_SUCCESS="false")
    assert "WARNING [" in stderr and f"job {ids['boom']} (boom) attempt 1 failed: ValueError: boom" in stderr
    assert "ERROR [" in stderr and f"job {ids['boom']} (boom) failed for good at attempt 2" in stderr
    assert stderr.count("Traceback (most recent call last)") == 2
    assert ids["noop"] not in stderr  # LEASEHOLD_LOG_SUCCESS=false
