"""Ids made before a namespace was sharded (docs/architecture.md, Shards):
``leasehold db upgrade --shards N`` moves each job of an unsharded
namespace to its queue's shard (``reshard.py``) and keeps its id, whose last
byte does not say that shard. The upgrade records, on shard 0, the newest
time (UUIDv7 milliseconds) of the ids it moved: ``{NAME:0}:moved_before``.

An id at or before that time may be a moved one: its shard is found once by
asking every shard (one pipelined EXISTS a shard for a batch of ids) and
kept for the life of the process (a job never moves again). Any later id
was made on its shard and routes by its last byte alone, so a store that
was never upgraded, or a job enqueued after the upgrade, costs nothing here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from store.ids import ID_TEXT, shard_of_id

#: Ids whose shard a process keeps (a moved id's shard never changes; past
#: this many the oldest half is forgotten and asked again if seen again).
KEPT = 200_000


def id_millis(job_id: str) -> int | None:
    """The Unix time in milliseconds at the head of UUIDv7 text (RFC 9562,
    section 5.7: its first 48 bits), None for a text that is no id."""
    if ID_TEXT.fullmatch(job_id) is None:
        return None
    return int(job_id[:8] + job_id[9:13], 16)


def holding_shards(shards: Sequence[Any], ids: Sequence[str]) -> dict[str, int]:
    """The index of the first of ``shards`` holding each of ``ids`` as a job
    or a batch: one pipelined EXISTS a shard; an id held nowhere is left out."""
    out: dict[str, int] = {}
    for k, shard in enumerate(shards):
        keys = shard.keys
        found = shard._pipe(lambda p, keys=keys: [p.exists(keys.job(i), keys.batch(i)) for i in ids])
        for job_id, hit in zip(ids, found, strict=True):
            if hit:
                out.setdefault(job_id, k)
    return out


def moved_before_key(shard: Any) -> str:
    """``{NAME:0}:moved_before``: the newest id time (ms) the upgrade moved."""
    return shard.keys._key("moved_before")


class MovedIds:
    """Where the moved ids of one ShardedRedisStore live."""

    def __init__(self, store: Any) -> None:
        self.store = store
        found = store.shards[0]._pipe(lambda p: p.get(moved_before_key(store.shards[0])))[0]
        #: The newest moved id's time (ms), None when nothing was moved.
        self.before: int | None = int(found) if found is not None else None
        self._known: dict[str, int] = {}

    def may_be_moved(self, job_id: str) -> bool:
        if self.before is None:
            return False
        ms = id_millis(job_id)
        return ms is not None and ms <= self.before

    def shard(self, job_id: str) -> int:
        """The shard index of ``job_id`` (its last byte's, unless moved)."""
        computed = shard_of_id(job_id, len(self.store.shards))
        if not self.may_be_moved(job_id):
            return computed
        if job_id not in self._known:
            self.locate([job_id])
        return self._known.get(job_id, computed)

    def locate(self, ids: Iterable[str]) -> None:
        """Find the shards of the ids among ``ids`` that may be moved and are
        not known yet: one pipeline a shard. An id found nowhere is not kept
        (its computed shard then answers JobNotFound, as for any unknown id)."""
        if self.before is None:
            return
        asked = [i for i in dict.fromkeys(ids) if i not in self._known and self.may_be_moved(i)]
        if not asked:
            return
        self._known.update(holding_shards(self.store.shards, asked))
        if len(self._known) > KEPT:
            for job_id in list(self._known)[: KEPT // 2]:
                del self._known[job_id]
