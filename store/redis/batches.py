"""Batches and chains on the Redis store (docs/architecture.md, Flow control):
a group of jobs written by one call of lua/enqueue_flow.lua (a chain's jobs
each wait for the one before) with an optional callback job that waits for
all of them; progress by status; cancel the whole batch (lua/cancel_batch.lua).
The dependencies themselves are ``store/redis/flow.py``'s.

A batch is one function call, all or nothing: Redis runs nothing else
meanwhile, so a batch of 10,000 jobs blocks the server for that call (see
bench/flow_control.py for its length). Round trips: create_batch 2,
get_batch and batch_jobs 2, cancel_batch 3.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from store.contract_flow import BATCH_IDS_SHOWN, Batch
from store.errors import JobNotFound
from store.flow_rules import ParentFailure, check_batch
from store.lifecycle import EventKind, JobStatus, Operation
from store.models import Job, JobSpec
from store.redis import codec
from store.redis.flow import RedisFlowPart
from store.redis.plumbing import op_args
from store.spec import check_actor, resolve_times, validate_spec

_OPEN = (JobStatus.Queued, JobStatus.Scheduled, JobStatus.InProgress)


class RedisBatchesPart(RedisFlowPart):
    """The batch half of ``RedisStore``'s flow control."""

    def create_batch(
        self, specs: Sequence[JobSpec], callback: JobSpec | None = None, *, kind: str = "batch"
    ) -> Batch:
        return self._create_batch(specs, callback, kind, "")

    def _create_batch(
        self, specs: Sequence[JobSpec], callback: JobSpec | None, kind: str, callback_elsewhere: str
    ) -> Batch:
        """create_batch; ``callback_elsewhere``: the id of a callback a sharded
        store writes on another shard (store/redis/shards/), named by the batch."""
        check_batch(specs, kind)
        batch_id = self._new_id()
        checked = resolve_times([validate_spec(replace(s, batch_id=batch_id)) for s in specs], self.now)
        ids = [self._new_id() for _ in checked]
        rows: list[tuple[JobSpec, str, Sequence[str]]] = [(checked[0], ids[0], ())]
        for (before, _), (job_id, spec) in itertools.pairwise(zip(ids, checked, strict=True)):
            parents = (before,) if kind == "chain" else ()
            if kind == "chain":
                spec = replace(spec, depends_on=parents, on_parent_failure=ParentFailure.CANCEL.value)
            rows.append((spec, job_id, parents))
        callback_id = callback_elsewhere
        if callback is not None:
            [callback] = resolve_times([validate_spec(callback)], self.now)
            policy = callback.on_parent_failure or ParentFailure.RUN.value
            callback_id = self._new_id()
            cb = replace(callback, depends_on=tuple(ids), on_parent_failure=policy)
            rows.append((cb, callback_id, ids))
        self.index_batch(batch_id)  # type: ignore[attr-defined]  # store/redis/batch_list.py
        self._write_flow(self._flow_specs(rows), (batch_id, kind, callback_id))
        return self.get_batch(batch_id)

    def get_batch(self, batch_id: str) -> Batch:
        record, ids = self._pipe(
            lambda p: (
                p.hgetall(self.keys.batch(batch_id)),
                p.lrange(self.keys.batch(batch_id, "jobs"), 0, -1),
            )
        )
        if not record:
            raise JobNotFound(batch_id)
        statuses = self._pipe(lambda p: [p.hget(self.keys.job(i), "status") for i in ids])
        counts = Counter(JobStatus(int(code)).name for code in statuses if code is not None)
        return Batch(
            id=batch_id,
            kind=record["kind"],
            size=int(record["size"]),
            callback_job_id=record.get("callback_job_id") or None,
            counts=dict(counts),
            finished=not any(counts.get(s.name) for s in _OPEN),
            created_at=float(record["created_at"]),
            canceled_at=float(record["canceled_at"]) if record.get("canceled_at") else None,
            canceled_by=record.get("canceled_by") or None,
            job_ids=[i for i, code in zip(ids, statuses, strict=True) if code is not None][:BATCH_IDS_SHOWN],
        )

    def batch_jobs(self, batch_id: str, limit: int = 100) -> list[Job]:
        [ids] = self._pipe(lambda p: p.lrange(self.keys.batch(batch_id, "jobs"), 0, max(limit, 1) - 1))
        found = self._pipe(lambda p: [p.hgetall(self.keys.job(i)) for i in ids])
        return [codec.job_from_hash(i, h) for i, h in zip(ids, found, strict=True) if h][:limit]

    def cancel_batch(self, batch_id: str, *, actor: str = "operator") -> Batch:
        check_actor(actor)
        args = self._args(
            *op_args(Operation.CANCEL), batch_id, actor, "batch canceled", EventKind.BATCH_CANCELED.value
        )
        reply = self._eval(self._lua.cancel_batch, self._route, args)
        if reply[0] == -1:
            raise JobNotFound(batch_id)
        return self.get_batch(batch_id)
