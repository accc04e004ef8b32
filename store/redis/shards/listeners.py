"""Wake-ups of a worker whose queues sit on several shards
(docs/architecture.md, Shards): a shard's wake-up lists are in its slot, so
one blocking pop cannot span shards on a cluster; a thread per shard blocks
on its own lists (``RedisWakeups``) and hands what it pops to ``wait``. A
shard that does not answer is waited on again after a pause; the others'
notices keep coming (a shard down is not an outage)."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence
from contextlib import suppress
from typing import Any

from store.errors import StoreUnavailable
from store.notices import Notice, Wakeups

log = logging.getLogger(__name__)

#: Seconds one shard's pop blocks before its thread looks at ``close``.
POLL_S = 1.0
#: Seconds a thread waits before it asks a shard that did not answer again.
RETRY_S = 1.0


class ShardedWakeups(Wakeups):
    """Notices of the queues ``shards`` lists (``[(shard store, its
    queues)]``, as ``ShardedRedisStore._visits`` groups them); with one
    shard, its own listener is used directly (no thread)."""

    def __init__(self, shards: Sequence[tuple[Any, Sequence[str]]]) -> None:
        self._listeners = [(store, store.wakeups(names)) for store, names in shards]
        self._by_queue = {
            q: w for (_, w), (_, names) in zip(self._listeners, shards, strict=True) for q in names
        }
        self._notices: queue.Queue[Notice] = queue.Queue()
        self._closed = threading.Event()
        self._threads = []
        if len(self._listeners) > 1:
            for _, listener in self._listeners:
                thread = threading.Thread(
                    target=self._pump, args=(listener,), daemon=True, name="shard-wakeups"
                )
                thread.start()
                self._threads.append(thread)

    def _pump(self, listener: Wakeups) -> None:
        while not self._closed.is_set():
            try:
                notice = listener.wait(POLL_S)
            except StoreUnavailable as exc:
                log.warning("a shard's wake-ups are unavailable: %s", exc)
                self._closed.wait(RETRY_S)
                continue
            if notice is not None:
                self._notices.put(notice)

    def wait(self, timeout_s: float) -> Notice | None:
        if not self._threads:
            return self._listeners[0][1].wait(timeout_s)
        try:
            return self._notices.get(timeout=max(timeout_s, 0.0))
        except queue.Empty:
            return None

    def give_back(self, notice: Notice) -> None:
        self._by_queue[notice.queue].give_back(notice)

    def withdraw(self) -> None:
        for _, listener in self._listeners:
            listener.withdraw()

    def close(self) -> None:
        self._closed.set()
        for _, listener in self._listeners:
            listener.close()
        for thread in self._threads:
            thread.join(POLL_S * 2 + 1)
        while not self._notices.empty():  # popped and not acted on: for another worker
            notice = self._notices.get_nowait()
            with suppress(StoreUnavailable):
                self.give_back(notice)
