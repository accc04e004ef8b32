"""Handlers known to every process, with real workers: a worker publishes the
handlers it serves; the CLI without LEASEHOLD_HANDLERS takes a handler's
defaults from that catalogue and refuses an unknown name; a job claimed by a
worker without its handler is given back, not failed, until its grace runs
out, so a rolling deploy loses no job."""

from __future__ import annotations

import json
import signal

import pytest

from store.catalogue import catalogue
from store.errors import ValidationError
from tests.backends import StoreHandle
from tests.workers.procs import Spawner, job_is, wait_until
from tests.workers.test_leasehold_cli import one_line, run
from workers.catalogue import enqueue


def test_a_worker_publishes_its_handlers_and_the_cli_uses_them(handle: StoreHandle, spawn: Spawner) -> None:
    store = handle.store
    worker = spawn.worker("--concurrency", "1", name="w-pub")
    entries = wait_until(lambda: catalogue(store).get("defaults") and catalogue(store), what="published")
    special = entries["defaults"]
    assert (special.queue, special.max_retries, special.timeout_s) == ("special", 7, 42.0)
    assert special.workers == ("w-pub",) and special.lease_ttl_s == 1.0
    assert entries["aio"].queue == "default"

    env = {"LEASEHOLD_STORE_URL": handle.url, "LEASEHOLD_HANDLERS": ""}  # no handler module loaded
    made = run("enqueue", "defaults", **env)
    assert made.returncode == 0, made.stderr
    job = store.get(made.stdout.strip())
    assert (job.queue, job.max_retries, job.timeout_seconds) == ("special", 7, 42.0)
    own = store.get(run("enqueue", "defaults", "--queue", "q2", "--max-retries", "1", **env).stdout.strip())
    assert (own.queue, own.max_retries, own.timeout_seconds) == ("q2", 1, 42.0)  # explicit options win
    line = one_line(run("enqueue", "no-such-handler", **env))
    assert "name: no handler named 'no-such-handler'" in line
    listed = {h["name"]: h for h in json.loads(run("handlers", "list", "--json", **env).stdout)}
    assert listed["defaults"]["queue"] == "special" and listed["defaults"]["workers"] == ["w-pub"]
    text = run("handlers", "list", **env).stdout
    assert "defaults  queue special; max retries 7; timeout 42s" in text

    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    assert catalogue(store) == {}  # no live worker serves them any more


def test_python_enqueue_by_name_refuses_an_unknown_name(handle: StoreHandle) -> None:
    import tests.handlers  # noqa: F401 - loaded here: the handler set is known

    job = enqueue("defaults", {"x": 1}, store=handle.store, priority=3)
    assert (job.queue, job.max_retries, job.priority) == ("special", 7, 3)
    with pytest.raises(ValidationError) as refused:
        enqueue("no-such-handler", store=handle.store)
    assert refused.value.field == "name"


def test_a_rolling_deploy_loses_no_job(handle: StoreHandle, spawn: Spawner) -> None:
    store = handle.store
    old = spawn.worker("--concurrency", "2", name="w-old")  # the old release: no new-in-release
    jobs = [store.enqueue("new-in-release", {"i": i}, max_retries=0) for i in range(6)]
    given_back = wait_until(
        lambda: [a for j in jobs for a in store.attempts(j.id) if a.error["type"] == "UnknownHandler"],
        what="the old worker gave a job back",
    )
    assert {a.worker_id for a in given_back} == {"w-old"}
    assert all(store.get(j.id).status.name in ("Queued", "Scheduled", "InProgress") for j in jobs)
    spawn.worker(
        "--concurrency",
        "2",
        name="w-new",
        env={"LEASEHOLD_HANDLERS": "tests.handlers,tests.rolling_handlers"},
    )
    for j in jobs:
        done = wait_until(lambda j=j: job_is(store, j.id, "Completed"), what=f"job {j.id} completed")
        assert (done.result["worker"], done.retry_count) == ("w-new", 0)  # no retry spent
    assert old.alive()


def test_past_its_grace_a_job_without_a_handler_fails(handle: StoreHandle, spawn: Spawner) -> None:
    store = handle.store
    spawn.worker("--concurrency", "1", name="w-g", env={"LEASEHOLD_UNKNOWN_HANDLER_GRACE": "0.5"})
    job = store.enqueue("new-in-release", max_retries=3)
    failed = wait_until(lambda: job_is(store, job.id, "Failed"), what="failed past its grace")
    assert (failed.error["type"], failed.retry_count) == ("UnknownHandler", 0)
    assert "is registered on worker w-g" in failed.error["message"]
