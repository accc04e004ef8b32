"""Wake-ups of idle workers over Redis lists, handed to one worker each.

``lua/enqueue.lua`` pushes, in the same script that writes the jobs, one
entry on the wake-up list of each queue that got a ready job
(``Keys.wakeup(queue)``): the job's ready-zset member when the call made one
job of that queue ready, else ``*``; the list keeps at most WAKEUP_KEPT
entries (past that, enqueue trims it to the newest half). A worker with a
free slot blocks on its queues' lists (``BLMPOP``, Redis 7; ``BLPOP`` on older
servers) and Redis hands each entry to one waiting worker, as ``BRPOP`` hands
a task to one huey consumer: only that worker wakes, and it leases the job
the entry names in one round trip (``RedisStore.claim_notified``), or claims
as usual for ``*``.

Entries are hints, never the source of truth: an entry may name a job that a
batch claim already took (the notified claim then finds nothing), and one
may be trimmed before anyone reads it (that job waits for a poll).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.exceptions import ResponseError

from store.notices import Notice, Wakeups
from store.redis.connect import unavailable
from store.redis.keys import Keys

#: Most entries a queue's wake-up list keeps (enqueue trims it to the newest half past that).
WAKEUP_KEPT = 32
#: The entry that names no single job: claim as usual.
ANY_JOB = "*"


class RedisWakeups(Wakeups):
    """One worker's wait on its queues' wake-up lists (a blocking pop on a
    connection of the store's pool)."""

    def __init__(self, client: Any, keys: Keys, queues: Sequence[str]) -> None:
        self._client = client
        self._key_of = {queue: keys.wakeup(queue) for queue in queues}
        self._queue_of = {key: queue for queue, key in self._key_of.items()}
        self._keys = list(self._queue_of)
        self._multi_pop = True  # BLMPOP until the server says it has none (Redis < 7)

    def wait(self, timeout_s: float) -> Notice | None:
        """Everything waiting on the first list that has entries (at most
        WAKEUP_KEPT), as one notice: the job an entry names when that is all
        there was, else the queue alone (one claim serves them all)."""
        with unavailable():
            if self._multi_pop:
                try:
                    reply = self._client.blmpop(
                        timeout_s, len(self._keys), *self._keys, direction="LEFT", count=WAKEUP_KEPT
                    )
                except ResponseError as exc:
                    if "unknown command" not in str(exc).lower():
                        raise
                    self._multi_pop = False
                    return None
            else:
                popped = self._client.blpop(self._keys, timeout=timeout_s)
                reply = None if popped is None else [popped[0], [popped[1]]]
        if not reply:
            return None
        key, entries = reply
        job = entries[0] if len(entries) == 1 and entries[0] != ANY_JOB else None
        return Notice(self._queue_of[key], job)

    def give_back(self, notice: Notice) -> None:
        """Put a notice this worker will not act on back at the head of its
        list, for another worker."""
        with unavailable():
            self._client.lpush(self._key_of[notice.queue], notice.job or ANY_JOB)

    def close(self) -> None:
        """Nothing to close: the pop's connection returns to the pool; a wait
        in progress ends within its timeout."""
