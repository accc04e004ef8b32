"""Flow control of a sharded Redis store (docs/architecture.md, Shards):
a queue's limits on its shard; a batch's jobs on one shard, its callback
on any (``links.py``); parents and children read wherever they sit."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from dataclasses import replace

from store.contract_flow import Batch
from store.errors import InvalidTransition, JobNotFound, ValidationError
from store.flow_rules import ParentFailure, QueueLimits, Usage
from store.models import Job, JobSpec
from store.parts import Part
from store.redis.shards import merge, shard_of_queue
from store.spec import resolve_times, validate_spec


class ShardedFlowPart(Part):
    """Queue limits, batches, parents and children."""

    def set_queue_limits(self, queue: str, limits: QueueLimits, *, actor: str = "operator") -> QueueLimits:
        return self.of_queue(queue).set_queue_limits(queue, limits, actor=actor)

    def queue_limits(self) -> dict[str, QueueLimits]:
        return {
            q: limits
            for mine in self.health.each(self.shards, lambda s: s.queue_limits())
            for q, limits in mine.items()
        }

    def limit_usage(self, queue: str) -> Usage:
        return self.of_queue(queue).limit_usage(queue)

    def limit_hold(self, job: Job) -> tuple[str, str] | None:
        return self.of_id(job.id).limit_hold(job)

    def create_batch(
        self, specs: Sequence[JobSpec], callback: JobSpec | None = None, *, kind: str = "batch"
    ) -> Batch:
        """On the shard of the jobs' queues (ValidationError ``queue`` when
        they are of queues on different shards); a callback of another shard
        is enqueued there after the batch, waiting for its jobs as a child
        with parents on another shard does (``links.py``)."""
        shards = {shard_of_queue(s.queue, len(self.shards)) for s in specs} or {0}
        if len(shards) > 1:
            raise ValidationError("queue", "a batch's jobs must be of queues on one shard")
        home = self.shards[shards.pop()]
        if callback is None or self.of_queue(callback.queue) is home:
            return home.create_batch(specs, callback, kind=kind)
        [callback] = resolve_times([validate_spec(callback)], self.now)
        there = self.of_queue(callback.queue)
        callback_id = there._new_id()
        batch = home._create_batch(specs, None, kind, callback_id)
        policy = callback.on_parent_failure or ParentFailure.RUN.value
        parents = tuple(j.id for j in home.batch_jobs(batch.id, limit=len(specs)))
        self.links.enqueue(replace(callback, depends_on=parents, on_parent_failure=policy), callback_id)
        return home.get_batch(batch.id)

    def get_batch(self, batch_id: str) -> Batch:
        return self.of_id(batch_id).get_batch(batch_id)

    def batch_jobs(self, batch_id: str, limit: int = 100) -> list[Job]:
        return self.of_id(batch_id).batch_jobs(batch_id, limit)

    def cancel_batch(self, batch_id: str, *, actor: str = "operator") -> Batch:
        """A callback on another shard is canceled first (then its parents'
        cancels find it ended), the batch's jobs in one call of their shard."""
        home = self.of_id(batch_id)
        callback = home.get_batch(batch_id).callback_job_id
        if callback and self.of_id(callback) is not home:
            with suppress(InvalidTransition, JobNotFound):
                self.cancel(callback, actor=actor)
        batch = home.cancel_batch(batch_id, actor=actor)
        self.links.after_write([home])
        return batch

    def list_batches(self, limit: int = 50, cursor: str | None = None) -> tuple[list[Batch], str | None]:
        return merge.merged_batches(
            self.health.each(self.shards, lambda s: s.list_batches(limit, cursor)), limit
        )

    def parents(self, job_id: str) -> list[Job]:
        return self.links.parents(job_id)

    def children(self, job_id: str, limit: int = 100) -> list[Job]:
        return self.links.related("children", job_id, limit)
