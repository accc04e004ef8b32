"""The README's quick start, verbatim, from a fresh folder: its handler on
queue ``billing``, ``leasehold enqueue send-invoice``, then ``leasehold worker
--burst`` with no ``--queues`` finds and completes the job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from store import open_store
from tests import readme_quickstart as quick
from tests.workers.procs import REPO


def _env(root: Path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEHOLD_")}
    env.update(
        PYTHONPATH=f"{root}{os.pathsep}{REPO}", LEASEHOLD_STORE_URL=url, LEASEHOLD_HANDLERS="myapp.jobs"
    )
    return env


def test_the_readme_quick_start_completes_its_job(tmp_path: Path) -> None:
    quick.write_app(tmp_path)
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    env = _env(tmp_path, url)
    outputs = {}
    commands = quick.commands()
    assert [c[1] for c in commands] == ["--version", "db", "enqueue", "worker", "stats"]
    for words in commands:
        done = subprocess.run(
            [sys.executable, *quick.console_script(), *words[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (words, done.stderr)
        outputs[words[1]] = done
    job_id = outputs["enqueue"].stdout.strip()
    assert "queues default:1,billing:1" in outputs["worker"].stderr
    stats = json.loads(outputs["stats"].stdout)
    assert stats["queues"] == {"billing": {"Completed": 1}}
    with open_store(url) as store:
        job = store.get(job_id)
    assert (job.status.name, job.queue, job.result) == ("Completed", "billing", {"sent": True})


def test_a_worker_told_its_queues_warns_of_a_handler_it_does_not_serve(tmp_path: Path) -> None:
    quick.write_app(tmp_path)
    env = _env(tmp_path, f"sqlite:///{tmp_path / 'jobs.db'}")
    run = [sys.executable, *quick.console_script()]
    assert subprocess.run([*run, "db", "upgrade"], cwd=tmp_path, env=env, timeout=120).returncode == 0
    done = subprocess.run(
        [*run, "worker", "--burst", "--queues", "default"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "queues default:1," in done.stderr
    assert (
        "handler 'send-invoice' takes jobs on queue 'billing', which this worker does not serve"
        in done.stderr
    )
