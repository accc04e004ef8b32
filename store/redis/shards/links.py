"""Dependencies across the shards of a sharded Redis store
(docs/architecture.md, Shards): a child whose parents sit on other shards.

Enqueue is two calls: ``lua/link_children.lua`` on each parent's shard (the
child joins ``remote_waiting:<parent>``; the parents' statuses come back),
then ``lua/enqueue_flow.lua`` on the child's shard with those statuses
(``remote_pending:<child>`` holds the parents it still waits for). A parent
that ends leaves one entry per such child in its shard's ``outbox`` in the
same call as its end (lib/dependencies.lua ``flow.finished``); ``drain``
applies entries on the children's shards (``lua/parent_done.lua``) and
only then removes them. So a release is applied at least once, and at most
once in effect: a replay finds the parent gone from ``remote_pending``. A
process that dies between the two calls leaves its entries in the outbox;
the next drain applies them (every recovery pass drains every shard).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from store import lifecycle
from store.errors import ParentUnfinished, ValidationError
from store.flow_rules import MAX_PARENTS
from store.lifecycle import JobStatus, Operation
from store.models import Job, JobSpec
from store.redis import codec
from store.redis.connect import unavailable


def read_hashes(shard: Any, ids: Sequence[str]) -> list[dict[str, str]]:
    """The job hashes of ``ids`` on ``shard``, one pipeline."""
    return shard._pipe(lambda p: [p.hgetall(shard.keys.job(i)) for i in ids])  # type: ignore[no-any-return]


#: Outbox entries one drain call reads from a shard.
DRAIN_BATCH = 100
#: Rounds of one drain (an applied entry may cancel a child whose own
#: children sit on yet another shard: its entries are drained next round).
DRAIN_ROUNDS = 16
#: Seconds a store trusts its last look at whether any link exists.
LOOK_S = 1.0


class Links:
    """The cross-shard dependency protocol of one ShardedRedisStore."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._linked = False
        self._looked_at = float("-inf")

    # ------------------------------------------------------------ enqueue
    def enqueue(self, spec: JobSpec, child_id: str | None = None) -> tuple[list[Job], str | None]:
        """Write ``spec`` (with parents on other shards) on its queue's
        shard, linked first on its parents' shards. Raises ValidationError
        (``depends_on``) for a parent that does not exist (nothing written
        on the child's shard)."""
        shard = self.store.of_queue(spec.queue)
        child_id = child_id or shard._new_id()
        remote: dict[str, int] = {}
        for other, parents in self.remote_parents(shard, spec.depends_on or ()).items():
            with unavailable():
                reply = other._eval(other._lua.link_children, other._route, [child_id, *parents])
            if reply[0] == "missing":
                raise ValidationError("depends_on", f"no job {reply[1]}")
            remote.update(zip(parents, (int(s) for s in reply[1:]), strict=True))
        self.mark()
        return shard._enqueue_flow(spec, child_id, remote)

    def remote_parents(self, shard: Any, parents: Iterable[str]) -> dict[Any, list[str]]:
        """``parents`` not on ``shard``, by their shard."""
        out: dict[Any, list[str]] = {}
        for parent in sorted(set(parents)):
            other = self.store.of_id(parent)
            if other is not shard:
                out.setdefault(other, []).append(parent)
        return out

    def mark(self) -> None:
        """Note that this namespace has cross-shard links (a key on shard 0,
        read by every process's ``active``)."""
        if not self._linked:
            records = self.store.records
            with unavailable():
                records._client.set(records.keys.linked, 1)
            self._linked = True

    def active(self) -> bool:
        """Whether any cross-shard link was ever made (then writes drain the
        outboxes they may have filled); looked up at most every LOOK_S."""
        if self._linked:
            return True
        at = time.monotonic()
        if at - self._looked_at >= LOOK_S:
            records = self.store.records
            with unavailable():
                self._linked = bool(records._client.exists(records.keys.linked))
            self._looked_at = at
        return self._linked

    # -------------------------------------------------------------- drain
    def after_write(self, shards: Iterable[Any]) -> None:
        """Drain the outboxes of ``shards`` when links exist (a write there
        may have ended a parent of a child elsewhere)."""
        if self.active():
            self.drain(shards)

    def drain(self, shards: Iterable[Any] | None = None) -> int:
        """Apply the outbox entries of ``shards`` (default every shard) on
        their children's shards, then remove them; the entries the applies
        leave elsewhere too. Returns how many entries changed a child."""
        pending = list(dict.fromkeys(self.store.shards if shards is None else shards))
        applied = 0
        for _ in range(DRAIN_ROUNDS):
            if not pending:
                break
            touched: list[Any] = []
            for shard in pending:
                with unavailable():
                    texts = shard._client.lrange(shard.keys.outbox, 0, DRAIN_BATCH - 1)
                if not texts:
                    continue
                by_child: dict[Any, list[Any]] = {}
                for text in texts:
                    child, parent, outcome, actor = orjson.loads(text)
                    by_child.setdefault(self.store.of_id(child), []).extend([child, parent, outcome, actor])
                for target, flat in by_child.items():
                    applied += int(target._eval(target._lua.parent_done, target._route, target._args(*flat)))
                    touched.append(target)
                shard._pipe(lambda p, s=shard, t=texts: [p.lrem(s.keys.outbox, 1, x) for x in t])
                if len(texts) == DRAIN_BATCH:
                    touched.append(shard)
            pending = list(dict.fromkeys(touched))
        return applied

    # -------------------------------------------------------------- reads
    def read(self, ids: Sequence[str]) -> list[Job]:
        """The jobs of ``ids`` that exist, each read on its shard, in order."""
        hashes = self.store._spread(ids, str, read_hashes)
        return [codec.job_from_hash(i, h) for i, h in zip(ids, hashes, strict=True) if h]

    def related(self, kind: str, job_id: str, limit: int) -> list[Job]:
        """A job's ``parents`` or ``children``, wherever they sit, by id."""
        shard = self.store.of_id(job_id)
        [ids] = shard._pipe(lambda p: p.smembers(shard.keys.related(kind, job_id)))
        return self.read(sorted(ids)[:limit])

    def parents(self, job_id: str) -> list[Job]:
        return self.related("parents", job_id, MAX_PARENTS)

    def check_parents(self, job_id: str, op: Operation) -> None:
        """For a requeue or retry-now (lifecycle.AWAIT_PARENTS) of a job with
        parents on other shards: raise InvalidTransition when ``op`` is not
        allowed from its status, ParentUnfinished when a parent (of any
        shard, the first by id) has not finished. The job's own shard checks
        its local parents again in its call."""
        if op not in lifecycle.AWAIT_PARENTS:
            return
        shard = self.store.of_id(job_id)
        [ids] = shard._pipe(lambda p: p.smembers(shard.keys.related("parents", job_id)))
        if not ids or not self.remote_parents(shard, ids):
            return
        job = shard.get(job_id)
        lifecycle.check_operation(job_id, op, job.status)
        found = {j.id: j.status for j in self.read(sorted(ids))}
        first = lifecycle.unfinished_parent(found.items())
        if first is not None:
            parent, status = first
            raise ParentUnfinished(job_id, job.status.name, op.value, parent, JobStatus(status).name)
