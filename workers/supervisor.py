"""``worker --processes N``: start N worker processes and keep them running.

Each child is ``python -m workers.child`` in its own process group (so a
terminal's Ctrl-C reaches the supervisor only, and each child gets exactly
one forwarded signal), with its WorkerConfig in the environment. Signals are
noted by the handler and forwarded by the loop, the thread that also starts
the children, so a child started while a signal came in still gets it. A child
that dies is restarted after an exponential backoff kept per slot
(``first_s * 2**(failures-1)``, at most ``max_s``; the count resets once a
child has lived ``stable_s``), so a crash loop cannot spin. SIGTERM/SIGINT
is forwarded to every child and the supervisor waits for them (a second
signal is forwarded too: the children then exit at once). In burst mode a
child that exits 0 is done and is not restarted. A child stopped by an
operator's ``stop`` command exits with EXIT_STOPPED and is not replaced
either: its slot stays empty; once every slot is empty that way the
supervisor exits with EXIT_STOPPED too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from workers.config import WorkerConfig
from workers.exits import EXIT_FORCED, EXIT_OK, EXIT_STOPPED, EXIT_UNRECORDED

log = logging.getLogger(__name__)

#: Environment variables a child reads (not LEASEHOLD_*: the app never sees them).
CONFIG_ENV = "_LEASEHOLD_WORKER_CONFIG"
PARENT_ENV = "_LEASEHOLD_SUPERVISOR_PID"


@dataclass
class Slot:
    """One child position; its process is replaced when it dies."""

    index: int
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    failures: int = 0
    generation: int = 0
    restart_at: float | None = None
    done: bool = False
    stopped: bool = False  # its worker was stopped by an operator: never replaced
    signalled: int = 0  # signals forwarded to the current process


class Supervisor:
    """Runs ``processes`` copies of one worker configuration."""

    def __init__(
        self,
        config: WorkerConfig,
        processes: int,
        *,
        first_backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        stable_s: float = 30.0,
        install_signals: bool = True,
    ) -> None:
        if processes < 1:
            raise ValueError("processes must be >= 1")
        self.config = config
        self.base_name = config.name or f"{socket.gethostname()}.{os.getpid()}"
        self.slots = [Slot(i) for i in range(1, processes + 1)]
        self.first_backoff_s = first_backoff_s
        self.max_backoff_s = max_backoff_s
        self.stable_s = stable_s
        self.install_signals = install_signals
        self._received: list[int] = []  # signal numbers, in order (append is atomic)
        self._wake = threading.Event()
        #: A child exited with EXIT_UNRECORDED (jobs left InProgress under its lease).
        self.unrecorded = False

    # ------------------------------------------------------------ signals
    def _on_signal(self, signum: int, _frame: Any) -> None:
        """Note the signal; the loop forwards it (within its 0.1 s tick). No
        lock is taken here: a handler runs between two bytecodes of the main
        thread, which may hold any lock at that moment."""
        self._received.append(signum)

    def _forward(self) -> None:
        """Send every live child each signal received since it was started
        that it has not been sent yet, in order. Runs in the loop's thread,
        which is also the only one that starts children: a child started
        while a signal came in gets it here too, exactly once."""
        received = list(self._received)
        for slot in self.slots:
            while slot.proc is not None and slot.signalled < len(received):
                signum = received[slot.signalled]
                slot.signalled += 1
                if slot.proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        slot.proc.send_signal(signum)

    @property
    def _signals(self) -> int:
        return len(self._received)

    @property
    def stopping(self) -> bool:
        return self._signals > 0

    def stop(self) -> None:
        """Stop gracefully, as on SIGTERM (thread-safe)."""
        self._on_signal(signal.SIGTERM, None)
        self._wake.set()

    # -------------------------------------------------------------- slots
    def child_name(self, slot: Slot) -> str:
        suffix = f".{slot.generation}" if slot.generation else ""
        return f"{self.base_name}.{slot.index}{suffix}"

    def _spawn(self, slot: Slot) -> None:
        config = self.config.with_(name=self.child_name(slot))
        env = dict(os.environ)
        env[CONFIG_ENV] = config.to_json()
        env[PARENT_ENV] = str(os.getpid())
        paths = [os.getcwd(), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        slot.proc = subprocess.Popen([sys.executable, "-m", "workers.child"], env=env, process_group=0)
        slot.signalled = 0
        slot.started = time.monotonic()
        slot.restart_at = None
        log.info("supervisor: started worker %s (pid %d)", config.name, slot.proc.pid)

    def _reap(self, slot: Slot) -> None:
        if slot.proc is None or (code := slot.proc.poll()) is None:
            return
        name, lived = self.child_name(slot), time.monotonic() - slot.started
        slot.proc = None
        if code == EXIT_UNRECORDED:  # it named the jobs; the supervisor's own exit says so too
            self.unrecorded = True
        if code == EXIT_STOPPED and not self.stopping:
            slot.done = slot.stopped = True
            log.warning("supervisor: worker %s was stopped by an operator; it is not replaced", name)
            return
        if self.stopping or (self.config.burst and code == 0):
            slot.done = True
            log.info("supervisor: worker %s exited with %d", name, code)
            return
        slot.failures = 1 if lived >= self.stable_s else slot.failures + 1
        delay = min(self.max_backoff_s, self.first_backoff_s * 2 ** (slot.failures - 1))
        slot.restart_at = time.monotonic() + delay
        slot.generation += 1
        log.warning(
            "supervisor: worker %s exited with %d after %.1fs; restarting in %.1fs", name, code, lived, delay
        )

    # ---------------------------------------------------------------- run
    def run(self) -> int:
        """Supervise until stopped, until every child was stopped by an
        operator, or (burst mode) until every child is done. Returns EXIT_OK,
        EXIT_FORCED after a second signal, EXIT_UNRECORDED when a child left
        jobs InProgress under its lease (it exited with that code), or
        EXIT_STOPPED when every child was stopped by an operator."""
        if self.install_signals:
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
        for slot in self.slots:
            self._spawn(slot)
        while True:
            self._forward()
            for slot in self.slots:
                self._reap(slot)
            if self.stopping and all(s.proc is None for s in self.slots):
                break
            if all(s.done for s in self.slots):
                break
            if not self.stopping:
                now = time.monotonic()
                for slot in self.slots:
                    if slot.proc is None and slot.restart_at is not None and slot.restart_at <= now:
                        self._spawn(slot)
            self._wake.wait(0.1)
            self._wake.clear()
        log.info("supervisor: all workers stopped")
        if self._signals > 1:
            return EXIT_FORCED
        if self.unrecorded:
            return EXIT_UNRECORDED
        if not self.stopping and all(s.stopped for s in self.slots):
            return EXIT_STOPPED
        return EXIT_OK
