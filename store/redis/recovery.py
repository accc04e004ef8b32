"""Recovery of expired leases in the Redis store (a mixin of RedisStore).

One batch is three round trips: ``expired_leases.lua`` reads up to ``limit``
ids from the leases zset (score < now), a pipeline reads their fields, Python
makes each retry decision (``lifecycle.decide_failure``), and
``apply_failures.lua`` applies the batch as compare-and-set per job (still
InProgress, same token and retry_count, lease still expired). Concurrent
recoverers therefore recover each job once, and a lease renewed after the
read is left alone. The preview stops after the decisions.
"""

from __future__ import annotations

from store import lifecycle
from store.lifecycle import FailureDecision, JobStatus, Operation
from store.models import RecoveredJob, lease_expired_error
from store.redis.plumbing import Failure, RedisPlumbing

S = JobStatus


class RecoveryMixin(RedisPlumbing):
    """The engine halves of ``recover_expired`` and ``preview_recovery``
    (store/shared.py takes the limit and the time)."""

    def _recovery_plan(self, limit: int) -> tuple[list[tuple[RecoveredJob, int]], int]:
        """Up to ``limit`` expired leases, oldest first, each with its retry
        decision and the retry_count it was made from; and how many expired
        leases were read. Reads only."""
        _, *ids = self._eval(self._lua.expired_leases, self._route, [self._offset(), limit])
        names = ("status", "name", "queue", "worker_id", "lease_token", "retry_count", "max_retries")
        rows = self._pipe(lambda p: [p.hmget(self.keys.job(job_id), names) for job_id in ids])
        plan = []
        for job_id, (code, name, queue, worker, token, retries, max_retries) in zip(ids, rows, strict=True):
            if code is None or S(int(code)) not in lifecycle.sources(Operation.FAIL):
                continue
            d = lifecycle.decide_failure(int(retries), int(max_retries), self.settings.retry)
            job = RecoveredJob(job_id, name, queue, worker, int(token), d.status, d.retry_count, d.delay_s)
            plan.append((job, int(retries)))
        return plan, len(ids)

    def _recover(self, limit: int | None, owner: str | None) -> tuple[list[RecoveredJob], int]:
        """One batch (SharedStore.recover_expired), or with ``owner`` None
        what it would do now, reading only (preview_recovery); see the
        module docstring. With ``limit`` None: the ZCOUNT of expired leases
        (lua/expired_leases.lua reads no ids then)."""
        if limit is None:
            return [], int(self._eval(self._lua.expired_leases, self._route, [self._offset(), 0])[0])
        plan, read = self._recovery_plan(limit)
        if owner is None:
            return [r for r, _ in plan], read
        items = []
        for r, retries in plan:
            decision = FailureDecision(r.outcome, r.retry_count, r.delay_s)
            error = lease_expired_error(r.worker_id, r.token)
            items.append(Failure(r.job_id, r.queue, r.token, retries, decision, error, True, owner))
        replies = self._apply_failures(items, want_jobs=False) if items else []
        return [r for (r, _), ok in zip(plan, replies, strict=True) if ok], read
