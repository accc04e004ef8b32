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
died between the two calls: then the key is free again).
"""

from __future__ import annotations

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
        """Claim ``key`` for ``job_id``: None when taken, else its holder."""
        home, replaced = self._home(key), ""
        for _ in range(CLAIM_ATTEMPTS):
            reply = self._call(home, "claim", kind, key, job_id, replaced)
            if int(reply[0]) == 1:
                return None
            owner, state = reply[1], reply[2]
            if self._holds(kind, key, owner, state, home):
                return str(owner)
            replaced = owner
        return ""

    def _holds(self, kind: str, key: str, owner: str, state: str, home: Any) -> bool:
        """Whether job ``owner`` still holds ``key`` (see the module docstring)."""
        try:
            job = self.store.get(owner)
        except JobNotFound:
            if state == "settled":
                return False  # its job was purged or deleted
            now = float(home._eval(home._lua.now, home._route, ["0"]))  # Redis TIME of the key's shard
            return now - int(state) < CLAIM_GRACE_S  # an enqueue in flight, unless it died
        if kind == "idempotency":
            return True
        if job.status not in TERMINAL:
            return True
        shard = self.store.of_id(owner)
        [until] = shard._pipe(lambda p: p.hget(shard.keys.unique_until, key))
        return until is not None and self.store.now() < float(until)

    def _release(self, taken: list[tuple[str, str]], job_id: str) -> None:
        for kind, key in taken:
            self._call(self._home(key), "release", kind, key, job_id)
