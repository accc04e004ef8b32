"""An operator's worker commands on real processes, on every store: a stopped
worker stays stopped under its supervisor (the other slots keep serving, the
supervisor leaves once every slot is stopped), a quiet is taken back, a
restarted worker does not inherit its predecessor's command; and, in
process, the registry entry is removed only after the heartbeat's last beat
returned."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from store.base import JobStore
from store.models import WorkerInfo
from tests.backends import StoreHandle
from tests.workers.procs import Spawner, job_is, registered, wait_until
from tests.workers.test_worker_inprocess import make_worker
from workers import worker as worker_module
from workers.exits import EXIT_STOPPED
from workers.worker import Worker

pytestmark = pytest.mark.slow


def _entry(store: JobStore, worker_id: str) -> WorkerInfo | None:
    return next((w for w in store.workers() if w.id == worker_id), None)


def test_a_stopped_worker_is_not_replaced_and_the_other_keeps_serving(
    handle: StoreHandle, spawn: Spawner
) -> None:
    store = handle.store
    sup = spawn.worker("--processes", "2", "--concurrency", "1", "--grace", "1", name="sup")
    wait_until(lambda: registered(store, "sup.1") and registered(store, "sup.2"), what="both children")

    store.command_worker("sup.1", "stop", actor="operator:ann")
    wait_until(
        lambda: "worker sup.1 was stopped by an operator; it is not replaced" in sup.log(),
        what="the supervisor to leave the slot empty",
    )
    job = store.enqueue("noop")
    done = wait_until(lambda: job_is(store, job.id, "Completed"), what="the other worker to serve")
    assert done.worker_id == "sup.2"
    assert [w.id for w in store.workers()] == ["sup.2"]  # sup.1 left; no sup.1.1 took its place
    assert "restarting" not in sup.log() and sup.alive()

    store.command_worker("sup.2", "stop", actor="operator:ann")
    assert sup.wait() == EXIT_STOPPED  # every slot stopped: the supervisor leaves too, with the same code
    assert store.workers() == []


def test_a_single_worker_stopped_by_an_operator_exits_with_its_own_code(
    handle: StoreHandle, spawn: Spawner
) -> None:
    store = handle.store
    proc = spawn.worker("--concurrency", "1", name="w-one")
    wait_until(lambda: registered(store, "w-one"), what="the worker to register")
    store.command_worker("w-one", "stop", actor="operator:ann")
    assert proc.wait() == EXIT_STOPPED
    assert not registered(store, "w-one")


def test_unquiet_lets_a_quiet_worker_claim_again(handle: StoreHandle, spawn: Spawner) -> None:
    store = handle.store
    proc = spawn.worker("--concurrency", "1", name="w-uq")
    wait_until(lambda: registered(store, "w-uq"), what="the worker to register")
    store.command_worker("w-uq", "quiet", actor="operator:ann")
    wait_until(lambda: "operator command 'quiet'" in proc.log(), what="the worker to go quiet")
    job = store.enqueue("noop")
    # Queued: not claimed; a hand-over that raced the quiet is released at once (no attempt spent)
    assert wait_until(lambda: job_is(store, job.id, "Queued"), what="the job to wait").retry_count == 0
    store.command_worker("w-uq", "unquiet", actor="operator:ann")
    done = wait_until(lambda: job_is(store, job.id, "Completed"), what="the job to be claimed")
    assert done.worker_id == "w-uq" and "operator command 'unquiet'" in proc.log()
    assert proc.alive()


@pytest.mark.parametrize("command", ["stop", "quiet"])
def test_a_restarted_worker_does_not_inherit_a_pending_command(
    handle: StoreHandle, spawn: Spawner, command: str
) -> None:
    store = handle.store
    # The entry an earlier process under this name left behind, with a command it never took.
    store.worker_heartbeat(WorkerInfo("w-re", "old-host", 1, ["default"], 1))
    store.command_worker("w-re", command, actor="operator:ann")
    proc = spawn.worker("--concurrency", "1", name="w-re")
    job = store.enqueue("noop")
    done = wait_until(lambda: job_is(store, job.id, "Completed"), what="the new process to run the job")
    assert done.worker_id == "w-re"
    entry = wait_until(lambda: _entry(store, "w-re"), what="the registry entry")
    assert (entry.command, entry.command_by) == (None, None) and entry.pid != 1
    assert proc.alive() and f"operator command {command!r}" not in proc.log()


class HeldBeats:
    """The test's real store, whose registry beats can be held before they
    reach it (a beat in flight, as on a slow network)."""

    def __init__(self, store: JobStore) -> None:
        self._store = store
        self.hold = threading.Event()
        self.held = threading.Event()
        self.release = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def worker_heartbeat(self, info: WorkerInfo, **options: Any) -> str | None:
        if self.hold.is_set() and not options.get("register"):
            self.held.set()
            self.release.wait(60)
        return self._store.worker_heartbeat(info, **options)


def test_a_beat_in_flight_at_shutdown_cannot_register_the_worker_again(
    handle: StoreHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = handle.store
    monkeypatch.setattr(worker_module, "HEARTBEAT_JOIN_S", 0.2)
    beats = HeldBeats(store)
    worker = make_worker(handle, concurrency=1, name="w-late")
    worker = Worker(worker.config, beats, install_signals=False)  # type: ignore[arg-type]
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run()), daemon=True)
    thread.start()
    try:
        wait_until(lambda: registered(store, "w-late"), timeout=30, what="the worker to register")
        beats.hold.set()
        beats.held.wait(30)
        assert beats.held.is_set(), "no registry beat was sent"
        worker.stop()
        thread.join(30)
        assert codes == [0]
        # The worker is done; its last beat has not reached the store yet, so its entry stays.
        assert registered(store, "w-late")
    finally:
        beats.release.set()
        worker.stop()
        thread.join(30)
    assert worker.heartbeat is not None
    worker.heartbeat.join(30)
    assert not worker.heartbeat.is_alive()
    assert not registered(store, "w-late")  # removed after the late beat, not before it
