"""Wake-ups of idle workers over Redis lists, handed to one worker each, and
the hand-over of a new job to an idle worker.

``lua/enqueue.lua`` pushes, in the same call that writes the jobs, one entry
on the wake-up list of each queue that got a ready job it did not hand over
(``Keys.wakeup(queue)``): the job's ready-zset member when the call made one
job of that queue ready, else ``*``; the list keeps at most WAKEUP_KEPT
entries (past that, enqueue trims it to the newest half). A worker with a
free slot blocks on its queues' lists (``BLMPOP``, Redis 7; ``BLPOP`` on older
servers) and Redis hands each entry to one waiting worker, as ``BRPOP`` hands
a task to one huey consumer: only that worker wakes, and it leases the job
the entry names in one round trip (``RedisStore.claim_notified``), or claims
as usual for ``*``.

Hand-over (docs/architecture.md, Hand-over): a listener opened with a worker
id also registers the worker on its queues' ``idle`` zsets (``lua/idle.lua``,
for REGISTRATION_S, renewed every REFRESH_S while it waits) and blocks on its
own list ``hand:<worker>`` first. An enqueue that finds a live registration
leases the job to that worker in the same call and pushes the claim's reply
there (``lib/hand_over.lua`` ``hand_over``), so the job reaches the worker with
the pop it is already blocked in: no claim round trip. Each registration
takes one job; the worker registers again before its next wait. A job whose
worker never popped it (it died) is released when its lease expires, with
no attempt spent (``recovery.py``); ``withdraw`` (no free slot, quiet) and
``close`` (stop) release what is left on the list. A popped entry whose
reply is lost (the connection broke) is lost like any claim's reply: the
job's lease expires and recovery retries it, an attempt spent.

Entries are hints, never the source of truth: an entry may name a job that a
batch claim already took (the notified claim then finds nothing), and one
may be trimmed before anyone reads it (that job waits for a poll).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from redis.exceptions import ResponseError

from store.models import Job
from store.notices import Notice, Wakeups
from store.redis import codec
from store.redis.connect import unavailable
from store.redis.keys import Keys

log = logging.getLogger(__name__)

#: Most entries a queue's wake-up list keeps (enqueue trims it to the newest half past that).
WAKEUP_KEPT = 32
#: The entry that names no single job: claim as usual.
ANY_JOB = "*"
#: Seconds a hand-over registration holds: a worker that died while idle is
#: handed jobs for at most this long (they come back when their lease expires).
REGISTRATION_S = 3.0
#: Seconds after which a waiting worker renews its registration.
REFRESH_S = 1.0


def handed_job(text: str | bytes, worker_id: str) -> Job:
    """A job from an entry of ``hand:<worker>``: the claim's reply entry
    (lib/hand_over.lua ``hand_over``, codec.claim_entry)."""
    return codec.claimed_job(text, worker_id)


def handed_id(text: str | bytes) -> str | None:
    """The job id of an entry of ``hand:<worker>`` (None if it has none)."""
    return codec.claim_entry(text)[0]


class HandOver:
    """A worker's registration for hand-over: who it is, the lease TTL
    (seconds) it asks for, how to call ``lua/idle.lua`` (``register(member,
    hold_s, queues)``) and how to release a job it will not run
    (``release(job)``)."""

    def __init__(
        self,
        worker_id: str,
        lease_ttl_s: float,
        register: Callable[[str, float, Sequence[str]], Any],
        release: Callable[[Job], Any],
    ) -> None:
        self.worker_id = worker_id
        self.member = f"{lease_ttl_s!r} {worker_id}"
        self.register = register
        self.release = release


class RedisWakeups(Wakeups):
    """One worker's wait on its queues' wake-up lists (a blocking pop on a
    connection of the store's pool)."""

    def __init__(self, client: Any, keys: Keys, queues: Sequence[str], hand: HandOver | None = None) -> None:
        self._client = client
        self._queues = list(queues)
        self._key_of = {queue: keys.wakeup(queue) for queue in queues}
        self._queue_of = {key: queue for queue, key in self._key_of.items()}
        self._keys = list(self._queue_of)
        self._hand = hand
        self._hand_key = keys.hand(hand.worker_id) if hand else None
        if self._hand_key:
            self._keys.insert(0, self._hand_key)
        self._registered_at: float | None = None  # monotonic time of the last registration
        self._registered = False  # a registration may be live (withdraw has one to take back)
        self._lock = threading.Lock()  # a registration's flag and its call go together
        self._closed = False
        self._multi_pop = True  # BLMPOP until the server says it has none (Redis < 7)

    def _register(self) -> None:
        """Register for hand-over unless a registration newer than REFRESH_S
        holds or the listener is closed."""
        if self._hand is None:
            return
        with self._lock:
            at = time.monotonic()
            if self._closed or (self._registered_at is not None and at - self._registered_at < REFRESH_S):
                return
            self._registered = True
            with unavailable():
                self._hand.register(self._hand.member, REGISTRATION_S, self._queues)
            self._registered_at = at

    def withdraw(self) -> None:
        """Take the hand-over registration back (the worker has no free slot,
        went quiet or stops; thread-safe), then release what was handed over
        before it and not popped: every enqueue that used the registration
        pushed its job in the same call, so the list holds them all by now."""
        if self._hand is None:
            return
        with self._lock:
            if not self._registered:
                return
            self._registered, self._registered_at = False, None
            with unavailable():
                self._hand.register(self._hand.member, 0, self._queues)
        with unavailable():
            while (text := self._client.lpop(self._hand_key)) is not None:
                self._release(handed_job(text, self._hand.worker_id))

    def _release(self, job: Job) -> None:
        """Release a job handed over to this worker that it will not run."""
        assert self._hand is not None
        try:
            self._hand.release(job)
        except Exception as exc:  # already recovered, or the store is gone: its lease decides
            log.info("releasing handed-over job %s failed: %s", job.id, exc)

    def wait(self, timeout_s: float) -> Notice | None:
        """The jobs handed over to this worker (``Notice.leased``), else
        everything waiting on the first wake-up list that has entries (at
        most WAKEUP_KEPT), as one notice: the job an entry names when that is
        all there was, else the queue alone (one claim serves them all)."""
        self._register()
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
        if self._hand is not None and key == self._hand_key:
            self._registered_at = None  # the registration that brought a job is used up
            jobs = tuple(handed_job(text, self._hand.worker_id) for text in entries)
            return Notice(jobs[0].queue, leased=jobs)
        job = entries[0] if len(entries) == 1 and entries[0] != ANY_JOB else None
        return Notice(self._queue_of[key], job)

    def give_back(self, notice: Notice) -> None:
        """Put a notice this worker will not act on back at the head of its
        list, for another worker; release the jobs it leased to this worker
        (``Notice.leased``: due again at once, no attempt spent)."""
        if notice.leased:
            for job in notice.leased:
                self._release(job)
            return
        with unavailable():
            self._client.lpush(self._key_of[notice.queue], notice.job or ANY_JOB)

    def close(self) -> None:
        """Take the hand-over registration back and release the jobs handed
        over and not popped yet; the pop's connection returns to the pool,
        and a wait in progress ends within its timeout."""
        if self._hand is None:
            return
        with self._lock:
            self._closed = True  # no wait registers again
            self._registered = True  # whatever the last call did: take it back
        self.withdraw()
