"""A worker whose clock is 10 minutes fast neither steals live leases nor
keeps its own alive after it dies: lease times come from the store's clock.

The skew comes from libfaketime (``faketime``, Debian package ``faketime``)
where it is installed and the store has a clock of its own (PostgreSQL,
Redis). SQLite has none: ``now()`` is computed inside the calling process,
so faketime would move the store's clock too (one machine, one clock: the
case does not arise in a real SQLite deployment). There, and where faketime
is missing, a ``sitecustomize`` on the child's PYTHONPATH shifts Python's
``time.time``/``time.time_ns`` instead, which still shows that the worker
itself never uses its own clock for leases.
"""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

from tests.backends import StoreHandle
from tests.workers.procs import REPO, Spawner, events, job_is, wait_until

SKEW_S = 600.0

SITECUSTOMIZE = """\
import os
import time

_offset = float(os.environ["LEASEHOLD_TEST_CLOCK_SKEW_S"])
_time, _time_ns = time.time, time.time_ns
time.time = lambda: _time() + _offset
time.time_ns = lambda: _time_ns() + int(_offset * 1e9)
"""


def skewed_env(handle: StoreHandle, folder: Path) -> tuple[dict[str, str], list[str], str]:
    """Environment and command prefix of a worker 10 minutes ahead, and how."""
    faketime = shutil.which("faketime")
    if faketime and handle.backend != "sqlite":
        return {}, [faketime, "-f", f"+{int(SKEW_S)}s"], "faketime"
    site = folder / "skew"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {"PYTHONPATH": f"{site}:{REPO}", "LEASEHOLD_TEST_CLOCK_SKEW_S": str(SKEW_S)}
    return env, [], "sitecustomize"


def test_skewed_worker_neither_steals_live_leases_nor_keeps_dead_ones(
    handle: StoreHandle, spawn: Spawner, tmp_path: Path
) -> None:
    store = handle.store
    release = tmp_path / "release-live-job"
    spawn.worker("--concurrency", "1", name="w-honest")
    live = store.enqueue("hold", {"path": str(release)})  # runs until the test lets it go
    wait_until(lambda: job_is(store, live.id, "InProgress", worker_id="w-honest"), what="live job claimed")

    env, prefix, how = skewed_env(handle, tmp_path)
    skewed = spawn.worker("--concurrency", "1", "--queues", "skew", name="w-skewed", env=env, prefix=prefix)
    parked = store.enqueue("sleep_first", {"seconds": 120}, queue="skew")
    held = wait_until(
        lambda: job_is(store, parked.id, "InProgress"), what=f"the skewed ({how}) worker's claim"
    )
    # Its start-up recovery has run (it precedes claiming) while the live lease was held.
    assert held.worker_id == "w-skewed"
    assert held.lease_expires_at.timestamp() - store.now() <= 1.0 + 1.0  # store clock + 1 s TTL, not +10 min

    skewed.signal(signal.SIGKILL)
    skewed.wait()
    killed_at = store.now()
    [expired] = wait_until(
        lambda: events(store, parked.id, "lease_expired"), what="the dead worker's lease recovered"
    )
    assert expired.at.timestamp() - killed_at <= 1.0 + 0.2 + 5.0  # TTL + recovery interval + slack

    release.touch()
    done = wait_until(lambda: job_is(store, live.id, "Completed"), what="live job completed")
    assert done.worker_id == "w-honest"
    assert (done.retry_count, done.lease_expirations) == (0, 0)
    assert len(events(store, live.id, "claimed")) == 1
