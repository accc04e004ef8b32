"""Idempotency and unique keys of a sharded Redis store (docs/architecture.md,
Shards): a key names one job in the whole deployment, whatever queue (so
whatever shard) its jobs are on.

A key's owner is kept on the key's shard (CRC-32 of the key, as a queue's;
``lua/shard_key.lua``). A keyed enqueue claims the key for the new job's id
there first, writes the job on its queue's shard (whose own check of the
key agrees: purge and delete free a key there as here), then marks the
claim settled; a refused write releases it. An owner found is still the
key's while its job exists (idempotency), or while its job is not finished
or its unique-until time has not passed (unique: ``UNIQUE_HOLDING``, as
lib/enqueue_keys.lua decides); else the claim takes the key over with a
compare-and-set on that owner. A claim neither settled nor released is an
enqueue in flight until CLAIM_GRACE_S have passed (its process may have
died between the two calls: then the key is free again). A keyed enqueue
that meets an enqueue in flight waits for it to settle or release (at most
IN_FLIGHT_WAIT_S), so that the holder it answers can be read.
"""

from __future__ import annotations

import time
from typing import Any
from zlib import crc32

from store.errors import JobNotFound
from store.lifecycle import TERMINAL
from store.models import Job, JobSpec
from store.spec import unique_key_of

#: Seconds a claim of a key whose job is not written yet is an enqueue in
#: flight (Redis TIME, not the store's clock: real processes, real time).
CLAIM_GRACE_S = 30
#: Claims of one key in one enqueue (each lost to another enqueue's claim).
CLAIM_ATTEMPTS = 4
#: Seconds a keyed enqueue waits for another one's claim in flight to settle
#: (its job written) or be released, re-reading the owner every 2..50 ms.
IN_FLIGHT_WAIT_S = 5.0
#: What ``_holds`` finds: the owner holds the key, the key is free to take
#: over, or the owner's enqueue is in flight (its job not written yet).
HELD, FREE, IN_FLIGHT = "held", "free", "in flight"


def shard_of_key(key: str, shards: int) -> int:
    """The shard keeping a key's owner: CRC-32 of its UTF-8 text modulo ``shards``."""
    return crc32(key.encode()) % shards


class Keys:
    """The keyed enqueues of one ShardedRedisStore."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def _call(self, shard: Any, *args: Any) -> Any:
        return shard._eval(shard._lua.shard_key, shard._route, list(args))

    def enqueue(self, spec: JobSpec, write: Any) -> tuple[list[Job], str | None]:
        """Enqueue keyed ``spec`` (it comes alone) with ``write(job id)``,
        the write on its queue's shard: ``([job], None)``, or ``([],
        holder)`` when a key is held (``""``: it kept changing hands)."""
        job_id = self.store.of_queue(spec.queue)._new_id()
        named = [
            (kind, key)
            for kind, key in (("idempotency", spec.idempotency_key), ("unique", unique_key_of(spec)))
            if key is not None
        ]
        taken: list[tuple[str, str]] = []
        for kind, key in named:
            holder = self._claim(kind, key, job_id)
            if holder is not None:
                self._release(taken, job_id)
                return [], holder
            taken.append((kind, key))
        jobs, holder = write(job_id)
        if not jobs:
            self._release(taken, job_id)
            return [], holder
        for kind, key in taken:
            self._call(self._home(key), "settle", kind, key, job_id)
        return jobs, None

    def _home(self, key: str) -> Any:
        return self.store.shards[shard_of_key(key, len(self.store.shards))]

    def _claim(self, kind: str, key: str, job_id: str) -> str | None:
        """Claim ``key`` for ``job_id``: None when taken, else its holder
        (``""`` when it changed hands CLAIM_ATTEMPTS times)."""
        home, replaced = self._home(key), ""
        attempts, deadline, pause = 0, time.monotonic() + IN_FLIGHT_WAIT_S, 0.002
        while attempts < CLAIM_ATTEMPTS:
            reply = self._call(home, "claim", kind, key, job_id, replaced)
            if int(reply[0]) == 1:
                return None
            owner, state = str(reply[1]), reply[2]
            found = self._holds(kind, key, owner, state, home)
            if found == HELD:
                return owner
            if found == IN_FLIGHT:
                if time.monotonic() >= deadline:
                    return owner
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
                continue
            replaced = owner
            attempts += 1
        return ""

    def _holds(self, kind: str, key: str, owner: str, state: Any, home: Any) -> str:
        """HELD, FREE or IN_FLIGHT: whether job ``owner`` still holds
        ``key`` (see the module docstring)."""
        try:
            job = self.store.get(owner)
        except JobNotFound:
            if state == "settled":
                return FREE  # its job was purged or deleted
            now = float(home._eval(home._lua.now, home._route, ["0"]))  # Redis TIME of the key's shard
            return IN_FLIGHT if now - int(state) < CLAIM_GRACE_S else FREE  # unless its enqueue died
        if kind == "idempotency" or job.status not in TERMINAL:
            return HELD
        shard = self.store.of_id(owner)
        [until] = shard._pipe(lambda p: p.hget(shard.keys.unique_until, key))
        return HELD if until is not None and self.store.now() < float(until) else FREE

    def _release(self, taken: list[tuple[str, str]], job_id: str) -> None:
        for kind, key in taken:
            self._call(self._home(key), "release", kind, key, job_id)
