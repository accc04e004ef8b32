"""``make demo``'s pieces for real: a smaller workload, a killed worker, Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from store import open_store
from store.lifecycle import JobStatus
from store.sql import migrate

ROOT = Path(__file__).resolve().parents[2]
S = JobStatus
STDLIB = Path(sysconfig.get_paths()["stdlib"])
UNPARSABLE = [STDLIB / "lib2to3/tests/data/bom.py", STDLIB / "lib2to3/tests/data/py2_test_grammar.py"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def processes_with(marker: str) -> list[int]:
    """Pids whose environment mentions ``marker`` (our store URL)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_demo_indexes_recovers_and_stops_cleanly(tmp_path: Path) -> None:
    missing = [p for p in UNPARSABLE if not p.exists()]
    if missing:
        pytest.skip(f"this Python has no {missing[0]}")
    url = f"sqlite:///{tmp_path}/demo.db"
    migrate(url)
    port = free_port()
    cmd = [sys.executable, "-m", "workers.demo", "--store", url, "--port", str(port), "--limit", "200"]
    cmd += [a for p in UNPARSABLE for a in ("--include", str(p))]
    cmd += ["--kill-after", "4", "--long-jobs", "2", "--long-seconds", "8"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    demo = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    store = open_store(url)
    try:
        wait_until(lambda: store.counts().by_status["Completed"] > 0, 60, "the first completed job")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/login", timeout=10) as page:
            assert page.status == 200 and b"password" in page.read()

        def settled() -> bool:
            c = store.counts().by_status
            return c["Queued"] + c["Scheduled"] + c["InProgress"] == 0 and c["Completed"] + c["Failed"] == 204

        wait_until(settled, 150, "every job to reach a final state")
        jobs = []
        cursor = None
        while True:
            page_ = store.list_jobs(limit=500, cursor=cursor)
            jobs += page_.items
            if not (cursor := page_.next_cursor):
                break
        by_path = {j.payload["path"]: j for j in jobs if j.name == "index-source"}
        for bad in UNPARSABLE:
            failed = by_path[str(bad)]
            assert (failed.status, failed.retry_count, failed.error["type"]) == (S.Failed, 2, "SyntaxError")
        ok = [j for j in by_path.values() if j.status is S.Completed]
        assert len(ok) == 200
        assert all(j.result["lines"] > 0 and j.result["functions"] >= 0 for j in ok)
        long_jobs = [j for j in jobs if j.name == "long-report"]
        assert all(j.status is S.Completed for j in long_jobs)
        assert any(j.lease_expirations >= 1 for j in long_jobs), "the killed worker's job was not recovered"
    finally:
        demo.send_signal(signal.SIGINT)
        out, _ = demo.communicate(timeout=60)
        store.close()
    assert demo.returncode == 0, out[-2000:]
    assert "SIGKILLed worker" in out
    wait_until(lambda: not processes_with(url), 10, "no process left behind")
