"""The hand-over of new jobs to idle workers (Redis, store/redis/wakeups.py)
with real worker processes: an idle worker is handed each job by the
enqueue itself (the claim is in the enqueue's call: started_at equals
created_at, one store clock reading), and a job handed to a worker killed
while idle comes back without an attempt spent and runs elsewhere."""

from __future__ import annotations

import signal

from store.redis.store import RedisStore
from tests.backends import StoreHandle
from tests.conftest import handle_fixture
from tests.workers.procs import Spawner, events, job_is, wait_until

handle = handle_fixture(["redis"])


def registered_for_hand_over(store: RedisStore, worker_id: str, queue: str = "default") -> bool:
    members = store._client.zrange(store.keys.idle(queue), 0, -1)
    return any(m.split(" ", 1)[1] == worker_id for m in members)


def test_an_idle_worker_is_handed_each_new_job(handle: StoreHandle, spawn: Spawner) -> None:
    store = handle.store
    spawn.worker("--concurrency", "2", name="w-idle")
    for i in range(3):
        wait_until(lambda: registered_for_hand_over(store, "w-idle"), what="the worker registered")
        job_id = store.enqueue("noop", {"i": i}).id
        done = wait_until(lambda j=job_id: job_is(store, j, "Completed"), what=f"job {i} ran")
        assert done.worker_id == done.result["worker"] == "w-idle"
        assert done.started_at == done.created_at  # leased in the enqueue's own call


def test_a_job_handed_to_a_killed_idle_worker_runs_elsewhere_with_no_attempt_spent(
    handle: StoreHandle, spawn: Spawner
) -> None:
    store = handle.store
    victim = spawn.worker("--concurrency", "1", name="w-dead")
    wait_until(lambda: registered_for_hand_over(store, "w-dead"), what="the victim registered")
    victim.signal(signal.SIGKILL)
    victim.wait()

    job = store.enqueue("noop", {"n": 1})
    handed = store.get(job.id)
    assert (handed.status.name, handed.worker_id) == ("InProgress", "w-dead")

    spawn.worker("--concurrency", "1", name="w-live")
    done = wait_until(lambda: job_is(store, job.id, "Completed"), what="the job ran on the survivor")
    assert done.worker_id == done.result["worker"] == "w-live"
    assert (done.retry_count, done.lease_expirations) == (0, 0)
    assert events(store, job.id, "released") and not events(store, job.id, "lease_expired")
