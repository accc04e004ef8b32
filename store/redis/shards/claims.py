"""The claim side of a sharded Redis store (docs/architecture.md, Shards):
claims visiting the shards of a worker's queues in their order, one call
per shard visited; heartbeats, acks, progress and nacks on each job's
shard; wake-ups a listener per shard (``listeners.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from store.base import check_fetch_next
from store.contract_operating import ProgressReport
from store.errors import StoreUnavailable, ValidationError
from store.models import HeartbeatResult, Job, Lease
from store.notices import Notice
from store.parts import Part
from store.redis.shards import shard_of_queue
from store.redis.shards.listeners import ShardedWakeups
from store.redis.store import RedisStore
from store.shared import CheckedProgress, EncodedAck


class ShardedClaimsPart(Part):
    """Claim, heartbeat, ack, progress, nack, release and wake-ups."""

    def claim(
        self, worker_id: str, queues: Sequence[str], limit: int = 1, lease_ttl_s: float | None = None
    ) -> list[Job]:
        """The shards of ``queues`` in the order of their first queue, one
        call each, until ``limit`` jobs are leased; a shard that does not
        answer is left alone for a while (``health.py``); StoreUnavailable
        when none answers."""
        if not queues:
            raise ValidationError("queues", "name at least one queue")
        jobs: list[Job] = []
        visited, last = [], None
        for shard, names in self._visits(queues):
            index = self.shards.index(shard)
            if len(jobs) >= limit or self.health.resting(index):
                continue
            try:
                jobs += shard.claim(worker_id, names, limit - len(jobs), lease_ttl_s)
            except StoreUnavailable as exc:  # a shard down: the others' jobs still run
                self.health.failed(index, exc)
                last = exc
                continue
            self.health.answered(index)
            visited.append(shard)
        if last is not None and not visited:
            raise last
        self.links.after_write(visited)  # a claim ends expired jobs (lib/expiry.lua)
        return jobs

    def _visits(self, queues: Sequence[str]) -> list[tuple[RedisStore, list[str]]]:
        """``queues`` grouped by shard, shards in the order of their first queue."""
        groups: dict[int, list[str]] = {}
        for queue in dict.fromkeys(queues):
            groups.setdefault(shard_of_queue(queue, len(self.shards)), []).append(queue)
        return [(self.shards[k], names) for k, names in groups.items()]

    def claim_notified(self, worker_id: str, notice: Notice, lease_ttl_s: float | None = None) -> list[Job]:
        shard = self.of_queue(notice.queue)
        jobs = shard.claim_notified(worker_id, notice, lease_ttl_s)
        self.links.after_write([shard])
        return jobs

    def claim_retry_after(self, worker_id: str) -> float | None:
        hints = [h for s in self.shards if (h := s.claim_retry_after(worker_id)) is not None]
        return min(hints, default=None)

    def heartbeat(
        self, worker_id: str, leases: Sequence[Lease], lease_ttl_s: float | None = None
    ) -> HeartbeatResult:
        out = HeartbeatResult([], [])
        for k, positions in self._by_shard(leases, lambda lease: lease.job_id).items():
            got = self.shards[k].heartbeat(worker_id, [leases[i] for i in positions], lease_ttl_s)
            out.renewed.extend(got.renewed)
            out.refused.extend(got.refused)
            out.deferred.extend(got.deferred)
        return out

    def _complete(
        self, acks: Sequence[EncodedAck], worker_id: str | None, return_jobs: bool
    ) -> list[Job | Any]:
        out = self._spread(acks, lambda a: a[0], lambda s, mine: s._complete(mine, worker_id, return_jobs))
        self.links.after_write(self.of_id(a[0]) for a in acks)
        return out

    def _report_progress(self, reports: Sequence[CheckedProgress], worker_id: str | None) -> list[Any]:
        return self._spread(reports, lambda r: r[0], lambda s, mine: s._report_progress(mine, worker_id))

    def complete_and_claim(
        self,
        acks: Sequence[tuple[str, int, Any]],
        worker_id: str,
        queues: Sequence[Sequence[str]],
        limit: int,
        lease_ttl_s: float | None = None,
        progress: Sequence[ProgressReport] = (),
    ) -> tuple[list[Any], list[Job]]:
        """One call when the acks and the worker's queues are of one shard;
        else each shard's acks (with their progress) in one call of that
        shard, the claim's first shard's folded into its claim, then the
        claim over the other shards (``claim``, by group)."""
        check_fetch_next(acks, queues, limit, progress)
        first = next((g for g in queues if g), None) if limit > 0 else None
        turn = self.of_queue(first[0]) if first else None
        outcomes: list[Any] = [None] * len(acks)
        by_shard = self._by_shard(acks, lambda a: a[0])
        jobs: list[Job] = []
        for k, positions in by_shard.items():
            shard = self.shards[k]
            mine = [acks[i] for i in positions]
            ids = {a[0] for a in mine}
            reports = [r for r in progress if r[0] in ids]
            if shard is turn:
                groups = [[q for q in g if self.of_queue(q) is shard] for g in queues]
                answers, jobs = shard.complete_and_claim(mine, worker_id, groups, limit, lease_ttl_s, reports)
            else:
                answers, _ = shard.complete_and_claim(mine, worker_id, [], 0, lease_ttl_s, reports)
            for i, answer in zip(positions, answers, strict=True):
                outcomes[i] = answer
        self.links.after_write(self.shards[k] for k in by_shard)
        if limit > 0 and not jobs:
            for group in queues:
                if group and (jobs := self.claim(worker_id, group, limit, lease_ttl_s)):
                    break
        return outcomes, jobs

    def fail(self, job_id: str, token: int, error: Any, *args: Any, **kwargs: Any) -> Job:
        shard = self.of_id(job_id)
        try:
            return shard.fail(job_id, token, error, *args, **kwargs)  # type: ignore[no-any-return]
        finally:
            self.links.after_write([shard])

    def release(self, job_id: str, token: int, worker_id: str | None = None) -> Job:
        return self.of_id(job_id).release(job_id, token, worker_id)

    def wakeups(
        self, queues: Sequence[str], worker_id: str | None = None, lease_ttl_s: float | None = None
    ) -> ShardedWakeups:
        """One listener per shard of ``queues`` (without hand-over: a
        notice names a job, claimed by ``claim_notified``)."""
        return ShardedWakeups([(s, names) for s, names in self._visits(queues)])
