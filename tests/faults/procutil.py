"""Helpers to pick and kill the worker children of a supervisor."""

from __future__ import annotations

import contextlib
import os
import random
import signal
from pathlib import Path

from store.base import JobStore
from tests.workers.procs import MARKER_ENV


def ours(pid: int, marker: str) -> bool:
    """True when ``pid`` is alive and carries the test's process marker."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z" and f"{MARKER_ENV}={marker}".encode() in environ.split(b"\0")


def live_children(store: JobStore, supervisor_pid: int, marker: str) -> list[tuple[int, bool]]:
    """(pid, holds jobs) of the registered workers that are alive, ours, and
    not the supervisor (killed children stay registered until they expire)."""
    return [
        (w.pid, bool(w.jobs_in_hand))
        for w in store.workers()
        if w.pid != supervisor_pid and ours(w.pid, marker)
    ]


def kill_random_child(store: JobStore, supervisor_pid: int, marker: str, rng: random.Random) -> int | None:
    """SIGKILL one live child, preferring one that holds jobs; its pid, or None."""
    children = live_children(store, supervisor_pid, marker)
    busy = [pid for pid, holds in children if holds]
    pool = busy or [pid for pid, _ in children]
    if not pool:
        return None
    pid = rng.choice(pool)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return pid
