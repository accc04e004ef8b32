"""Flow control on the Redis store (docs/architecture.md, Flow control): queue
limits decided in the claim, children released or canceled in the call that
finishes their parent, jobs with flow options enqueued by their own function.
Every decision is ``store.flow_rules``'s, ported to Lua in ``lua/lib/flow.lua``
(``tests/store/test_redis_flow_lua.py`` runs the same cases through both);
this module passes arguments and reads replies.

Round trips: set_queue_limits 1; limit_usage and limit_hold 1; an enqueue
with flow options 1 (2 when its idempotency key is taken); parents and
children 2.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from store import flow_rules as flow
from store.errors import ValidationError
from store.flow_rules import QueueLimits, Usage
from store.lifecycle import EventKind
from store.models import Job, JobSpec
from store.parts import Part
from store.redis import codec
from store.spec import check_queue_name

#: The claim's last reply when a rate limit held jobs (lua/claim.lua).
RETRY_AFTER = "retry_after"


def limits_json(limits: QueueLimits) -> str:
    """QueueLimits as the limits hash holds it: JSON without nulls ('' for none)."""
    if not limits.any:
        return ""
    return codec.dumps({k: v for k, v in limits.to_json().items() if v is not None})


def limits_from_json(text: str) -> QueueLimits:
    """Inverse of limits_json; a stored value that no longer passes the rule
    is not applied and named in ``invalid`` (``flow.stored_limits_json``)."""
    return flow.stored_limits_json(text)


class RedisFlowPart(Part):
    """The flow half of ``RedisStore`` (batches are ``RedisBatchesPart``'s)."""

    supports_flow = True

    def __init__(self, engine: Any, name: str) -> None:
        super().__init__(engine, name)
        self._retry_after: dict[str, float] = {}
        self._retry_lock = threading.Lock()

    # ------------------------------------------------------------ limits
    def set_queue_limits(self, queue: str, limits: QueueLimits, *, actor: str = "operator") -> QueueLimits:
        check_queue_name(queue)
        text = limits_json(limits)
        message = f"queue {queue} limits {codec.dumps(limits.to_json())}"
        args = self._args(queue, text, EventKind.QUEUE_LIMITS_SET.value, actor, message)
        self._eval(self._lua.flow_limits, self._route, args)
        return limits

    def queue_limits(self) -> dict[str, QueueLimits]:
        [found] = self._pipe(lambda p: p.hgetall(self.keys.limits))
        return {queue: limits_from_json(text) for queue, text in sorted(found.items())}

    def _usage(self, queue: str) -> tuple[QueueLimits, Usage, float]:
        """lua/flow_usage.lua: the queue's limits, its usage, the store's now."""
        now, text, running, by_key, starts, first, by_key_starts = self._eval(
            self._lua.flow_usage, self._route, [self._offset(), queue]
        )
        usage = Usage(running=int(running), starts=int(starts), first_start=float(first) if first else None)
        usage.running_by_key = {k: int(n) for k, n in codec.flat_to_dict(by_key).items()}
        for i in range(0, len(by_key_starts), 3):
            key, n, at = by_key_starts[i : i + 3]
            usage.starts_by_key[key] = (int(n), float(at))
        return limits_from_json(text), usage, float(now)

    def limit_usage(self, queue: str) -> Usage:
        return self._usage(queue)[1]

    def limit_hold(self, job: Job) -> tuple[str, str] | None:
        limits, usage, now = self._usage(job.queue)
        return flow.hold(job.limit_key, limits, usage, now) if limits.any else None

    def claim_retry_after(self, worker_id: str) -> float | None:
        with self._retry_lock:
            return self._retry_after.pop(worker_id, None)

    def _note_retry(self, worker_id: str, replies: list[Any]) -> list[Any]:
        """The claim's replies without the trailing retry-after entry, which
        is kept for ``claim_retry_after`` (a claim without it clears it)."""
        retry = None
        if replies and isinstance(replies[-1], list) and replies[-1][0] == RETRY_AFTER:  # jobs are JSON texts
            retry = float(replies.pop()[1])
        with self._retry_lock:
            if retry is None:
                self._retry_after.pop(worker_id, None)
            else:
                self._retry_after[worker_id] = retry
        return replies

    # ------------------------------------------------------------ enqueue
    def _flow_specs(
        self, specs: Sequence[tuple[JobSpec, str, Sequence[str]]], remote: dict[str, int] | None = None
    ) -> list[str]:
        """ARGV of lua/enqueue_flow.lua for ``(spec, id, parent ids)``;
        ``remote``: the statuses of parents on other shards, linked there
        (store/redis/shards/), of a single job."""
        out = []
        for spec, job_id, parents in specs:
            fields = {**codec.spec_fields(spec, job_id, self.settings), **codec.flow_fields(spec)}
            if fields.get("unique_key"):
                raise ValidationError(
                    "unique_for", "cannot be combined with depends_on, limit_key or a batch"
                )
            row = {"f": fields, "d": float(spec.delay_s), "p": sorted(set(parents))}
            out.append(codec.dumps({**row, "r": remote} if remote else row))
        return out

    def _write_flow(self, jobs: list[str], batch: Sequence[str] = ("", "", "")) -> tuple[str, Any]:
        """lua/enqueue_flow.lua; raises ValidationError for a missing parent."""
        args = self._args(EventKind.ENQUEUED.value, *batch, *jobs)
        reply = self._eval(self._lua.enqueue_flow, self._route, args)
        if reply[0] == "missing":
            raise ValidationError("depends_on", f"no job {reply[1]}")
        return reply[0], reply[1:]

    def _enqueue_flow(
        self, spec: JobSpec, job_id: str | None = None, remote: dict[str, int] | None = None
    ) -> tuple[list[Job], str | None]:
        """One job with flow options (``([job], None)``), or the id of the
        job holding its idempotency key (``([], id)``): SharedStore._insert.
        A sharded store names the id and its parents on other shards
        (``_flow_specs``)."""
        parents, job_id = list(spec.depends_on or ()), job_id or self._new_id()
        status, rest = self._write_flow(self._flow_specs([(spec, job_id, parents)], remote))
        if status == "duplicate":
            return [], rest[1]
        return [codec.job_from_flat(job_id, rest[0])], None

    # ------------------------------------------------------- dependencies
    def _related(self, key: str, limit: int) -> list[Job]:
        [ids] = self._pipe(lambda p: p.smembers(key))
        chosen = sorted(ids)[:limit]
        found = self._pipe(lambda p: [p.hgetall(self.keys.job(i)) for i in chosen])
        return [codec.job_from_hash(i, h) for i, h in zip(chosen, found, strict=True) if h]

    def parents(self, job_id: str) -> list[Job]:
        return self._related(self.keys.related("parents", job_id), flow.MAX_PARENTS)

    def children(self, job_id: str, limit: int = 100) -> list[Job]:
        return self._related(self.keys.related("children", job_id), limit)
