"""``async def`` handlers in real worker processes, on both pools: they
complete (on one event loop per process), report progress, time out and are
canceled like a plain function's jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.backends import StoreHandle
from tests.conftest import handle_fixture
from tests.workers.procs import Spawner, job_is, wait_until

handle = handle_fixture(["sqlite"])  # the worker's side; the stores have their contract tests

POOLS = ["thread", "process"]


@pytest.mark.parametrize("pool", POOLS)
def test_async_jobs_complete_with_progress_on_one_loop(
    handle: StoreHandle, spawn: Spawner, pool: str
) -> None:
    store = handle.store
    spawn.worker("--pool", pool, "--concurrency", "1", name=f"aio-{pool}")
    jobs = [store.enqueue("aio", {"seconds": 0.01}) for _ in range(3)]
    done = [
        wait_until(lambda j=j: job_is(store, j.id, "Completed"), what="async job completed") for j in jobs
    ]
    assert all(j.result["worker"] == f"aio-{pool}" for j in done)
    assert all((j.progress or {}).get("message") == "async done" for j in done), [j.progress for j in done]
    if pool == "thread":  # one loop for the worker process's async jobs
        assert len({j.result["loop"] for j in done}) == 1


@pytest.mark.parametrize("pool", POOLS)
def test_async_job_times_out_and_its_task_is_cancelled(
    handle: StoreHandle, spawn: Spawner, pool: str, tmp_path: Path
) -> None:
    store = handle.store
    spawn.worker("--pool", pool, "--concurrency", "1", name=f"aio-{pool}")
    flag = tmp_path / "cancelled"
    job = store.enqueue("aio", {"seconds": 120, "cancelled_path": str(flag)}, timeout_s=0.5, max_retries=0)
    failed = wait_until(lambda: job_is(store, job.id, "Failed"), what="async job timed out")
    assert failed.error["type"] == "JobTimeout"
    after = store.enqueue("aio", {"seconds": 0})  # the slot is free again at once
    wait_until(lambda: job_is(store, after.id, "Completed"), timeout=30, what="next job ran")
    if pool == "thread":  # the task saw the cancellation (a process is killed instead)
        wait_until(flag.exists, what="the task cancelled")


@pytest.mark.parametrize("pool", POOLS)
def test_canceled_async_job_stops(handle: StoreHandle, spawn: Spawner, pool: str, tmp_path: Path) -> None:
    store = handle.store
    spawn.worker("--pool", pool, "--concurrency", "1", name=f"aio-{pool}")
    flag = tmp_path / "cancelled"
    job = store.enqueue("aio", {"seconds": 120, "cancelled_path": str(flag)})
    running = wait_until(
        lambda: (j := job_is(store, job.id, "InProgress")) and j.progress and j, what="async job running"
    )
    assert running.progress["message"] == "async halfway"
    store.cancel(job.id)
    after = store.enqueue("aio", {"seconds": 0})
    wait_until(lambda: job_is(store, after.id, "Completed"), timeout=30, what="the slot served the next job")
    assert store.get(job.id).status.name == "Canceled"
    if pool == "thread":
        wait_until(flag.exists, what="the task cancelled")
