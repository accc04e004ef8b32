"""The event loop ``async def`` handlers run on: one per process, in a thread.

A job slot (a pool thread, or a pool process's main thread) hands the
handler's coroutine to this loop and waits for it, so an async handler keeps
its slot like a plain function and obeys the same concurrency, timeout and
lease rules. One loop per process, started on first use and kept for the
process's life (the choice of Dramatiq's AsyncIO middleware and arq), lets
handlers share clients bound to a loop (an HTTP session, a database pool)
across jobs; ``asyncio.run`` per job would make a new loop every time and
break such clients. When the run's ``ctx.cancelled`` is set (canceled, timed
out, lease lost or given back) the task is cancelled: the handler sees
``asyncio.CancelledError`` at its next ``await``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from concurrent.futures import CancelledError
from typing import Any, TypeVar

T = TypeVar("T")


class HandlerCancelled(Exception):
    """An async handler's task was cancelled because its run was."""


class EventLoopThread:
    """An asyncio loop running forever in a daemon thread, made on first use."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop (started now if need be)."""
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                threading.Thread(target=serve, name="leasehold-asyncio", daemon=True).start()
                ready.wait()
                self._loop = loop
            return self._loop

    def run(self, awaitable: Awaitable[T], cancelled: Any) -> T:
        """Run ``awaitable`` on the loop and wait for its result (or its
        exception). ``cancelled`` is the run's ``ctx.cancelled``: when it is
        set the task is cancelled and HandlerCancelled raised here."""

        async def main() -> T:
            return await awaitable

        future = asyncio.run_coroutine_threadsafe(main(), self.loop())
        cancelled.add_callback(future.cancel)
        try:
            return future.result()
        except CancelledError:
            raise HandlerCancelled("the job's task was cancelled") from None


#: The process's loop for async handlers.
LOOP = EventLoopThread()
