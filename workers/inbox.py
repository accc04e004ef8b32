"""The claim stage's inbox: everything the worker's main thread is told.

A worker flows one way (docs/architecture.md, "The worker as a pipeline"):
the main thread claims and hands runs to the slots (``workers.pool``); a
slot runs one and posts its completion here; the main thread records the
completions it finds here (``workers.recorder``), on a store that fetches
next in the same call that claims the next jobs, as dramatiq's consumer
acks through its own queue. The wake-up thread posts its notices here too,
and anything that must wake the main thread (a freed slot, a stop, an
operator's command) posts a wake-up. Nothing calls into the main thread.

Back-pressure: at most ``max_acks`` completions wait; a slot that would add
one more blocks until the main thread takes them. Once closed (shutdown)
the inbox takes nothing more: ``ack`` and ``notice`` return False and the
caller records or gives back what it holds itself.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from store.notices import Notice
from workers.inflight import Running

#: A completion to record: the run and its handler's result.
Ack = tuple[Running, Any]

#: Seconds a slot blocked on a full inbox waits between two looks.
FULL_WAIT_S = 0.1


class Inbox:
    """Thread-safe; the main thread alone takes from it."""

    def __init__(self, max_acks: int) -> None:
        self.max_acks = max_acks
        self._cond = threading.Condition()
        self._acks: deque[Ack] = deque()
        self._notices: deque[Notice] = deque()
        self._woken = False
        self._closed = False

    def ack(self, run: Running, result: Any) -> bool:
        """Post a completion (a slot's thread); False once closed. Blocks while
        ``max_acks`` completions wait."""
        with self._cond:
            while len(self._acks) >= self.max_acks and not self._closed:
                self._cond.wait(FULL_WAIT_S)
            if self._closed:
                return False
            self._acks.append((run, result))
            self._cond.notify_all()
            return True

    def notice(self, notice: Notice) -> bool:
        """Post a wake-up thread's notice; False once closed."""
        with self._cond:
            if self._closed:
                return False
            self._notices.append(notice)
            self._cond.notify_all()
            return True

    def wake(self) -> None:
        """End the main thread's current or next wait."""
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    def wait(self, timeout_s: float) -> None:
        """Block up to ``timeout_s`` seconds unless something is posted (or was,
        since the last wait)."""
        with self._cond:
            if not (self._woken or self._acks or self._notices):
                self._cond.wait(timeout_s)
            self._woken = False

    def pending_acks(self) -> int:
        """Completions waiting to be recorded."""
        with self._cond:
            return len(self._acks)

    def take_acks(self, limit: int) -> list[Ack]:
        """Up to ``limit`` completions, oldest first."""
        with self._cond:
            taken = [self._acks.popleft() for _ in range(min(limit, len(self._acks)))]
            self._cond.notify_all()  # slots blocked on a full inbox may go on
            return taken

    def take_notices(self) -> list[Notice]:
        """Every notice posted, oldest first."""
        with self._cond:
            taken = list(self._notices)
            self._notices.clear()
            return taken

    def close(self) -> tuple[list[Ack], list[Notice]]:
        """Take nothing more; return what is left (completions, notices)."""
        with self._cond:
            self._closed = True
            acks, notices = list(self._acks), list(self._notices)
            self._acks.clear()
            self._notices.clear()
            self._cond.notify_all()
            return acks, notices
