"""The pytest plugin users test their handlers with (workers.testing): the
README's own tests of its example handler, run verbatim by pytest in a
fresh folder; and drain through the real lifecycle (retries over a moved
clock, timeouts, unique keys) and eager mode, in this process."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from store.base import JobStore
from tests import readme_quickstart as quick
from tests.workers.procs import REPO

#: What ``pip install`` writes for the plugin: a distribution whose pytest11 entry point names it.
ENTRY_POINTS = "[pytest11]\nleasehold = workers.testing\n"


def test_the_plugin_is_a_pytest11_entry_point() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"leasehold": "workers.testing"}


def test_the_readme_tests_of_its_handler_pass(tmp_path: Path) -> None:
    quick.write_app(tmp_path)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_jobs.py").write_text(quick.handler_tests())
    dist = tmp_path / "site" / "leasehold-0.0.0.dist-info"  # as if installed: pytest finds the plugin itself
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: leasehold\nVersion: 0.0.0\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEHOLD_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(tmp_path / "site"), str(REPO)])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_drain_runs_retries_over_the_moved_clock(leasehold_store: JobStore, leasehold_drain) -> None:
    import tests.handlers as th

    boom = th.boom.enqueue(max_retries=2)
    ok = th.noop.enqueue()
    jobs = {j.id: j for j in leasehold_drain()}
    assert jobs[ok.id].status.name == "Completed"
    failed = jobs[boom.id]
    assert (failed.status.name, failed.retry_count) == ("Failed", 2)  # three attempts, no sleeping
    assert len(leasehold_store.attempts(boom.id)) == 3
    assert leasehold_drain() == []  # nothing left


def test_drain_without_advance_leaves_a_retry_waiting(leasehold_store: JobStore, leasehold_drain) -> None:
    import tests.handlers as th

    job = th.boom.enqueue(max_retries=1)
    [waiting] = leasehold_drain(advance=False)
    assert (waiting.id, waiting.status.name, waiting.retry_count) == (job.id, "Scheduled", 1)


def test_drain_enforces_timeouts_and_unique_keys(leasehold_store: JobStore, leasehold_drain) -> None:
    import tests.handlers as th

    slow = th.sleep.enqueue({"seconds": 1.0}, timeout_s=0.2, max_retries=0)
    first = th.noop.enqueue({"n": 1}, unique_key="k", unique_for=60)
    assert th.noop.enqueue({"n": 2}, unique_key="k", unique_for=60).id == first.id
    jobs = {j.id: j for j in leasehold_drain()}
    assert jobs[slow.id].error["type"] == "JobTimeout"
    assert jobs[first.id].status.name == "Completed"


def test_eager_mode_returns_the_finished_job(leasehold_eager: JobStore) -> None:
    import tests.handlers as th

    done = th.noop.enqueue({"x": 1})
    assert done.status.name == "Completed" and done.result["worker"] == "leasehold-drain"
    failed = th.permanent.enqueue()
    assert (failed.status.name, failed.error["type"]) == ("Failed", "PermanentError")


@pytest.mark.parametrize("fixture", ["leasehold_store"])
def test_the_store_is_the_default_of_enqueue_only_during_the_test(fixture: str, request) -> None:
    from workers.enqueueing import default_store

    store = request.getfixturevalue(fixture)
    assert default_store() is store


def test_drain_enqueues_periodic_ticks_on_the_moved_clock(leasehold_store: JobStore, leasehold_drain) -> None:
    from workers import handler, periodic
    from workers.handlers import unregister
    from workers.periodic import forget

    @handler("plugin-nightly")
    def nightly(ctx):
        return {"tick": ctx.headers}

    periodic("plugin-nightly", "plugin-nightly", "0 3 * * *")
    try:
        assert leasehold_drain(periodic=True) == []  # first seen: starts with its next tick
        leasehold_store.clock_offset_s += 86400
        [job] = [j for j in leasehold_drain(periodic=True) if j.name == "plugin-nightly"]
        assert job.status.name == "Completed" and job.result["tick"]["Leasehold-Periodic"] == "plugin-nightly"
        assert [j for j in leasehold_drain(periodic=True) if j.name == "plugin-nightly"] == []  # once a tick
    finally:
        forget("plugin-nightly")
        unregister("plugin-nightly")
