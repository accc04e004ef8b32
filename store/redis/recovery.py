"""Recovery of expired leases in the Redis store (a mixin of RedisStore).

One batch is three round trips (four when a lease expired: the registry
read of ``_handler_policies``): ``expired_leases.lua`` reads up to ``limit``
ids from the leases zset (score < now), a pipeline reads their fields, Python
makes each retry decision (``lifecycle.decide_failure``, by the job's
handler's policy), and
``apply_failures.lua`` applies the batch as compare-and-set per job (still
InProgress, same token and retry_count, lease still expired). Concurrent
recoverers therefore recover each job once, and a lease renewed after the
read is left alone. The preview stops after the decisions.

A job an enqueue handed over to an idle worker (store/redis/wakeups.py) whose
entry is still on that worker's list ``hand:<worker>`` never reached the
worker (it died, or stopped without releasing it): it is released instead
(``lua/release.lua``: Scheduled, due at once, no attempt spent), taking its
entry off the list in the same call (a worker that pops it first runs it,
and its lease decides as for any other job). A recovery of a release before
2026-11-27 fails such a job instead (an attempt spent) during a rolling
deploy.
"""

from __future__ import annotations

from store import lifecycle
from store.lifecycle import FailureDecision, JobStatus, Operation
from store.models import RecoveredJob, lease_expired_error
from store.parts import Part
from store.redis.plumbing import Failure, op_args
from store.redis.wakeups import handed_id


class RedisRecoveryPart(Part):
    """The engine halves of ``recover_expired`` and ``preview_recovery``
    (store/shared.py takes the limit and the time)."""

    def _recovery_plan(self, limit: int) -> tuple[list[tuple[RecoveredJob, int | str]], int]:
        """Up to ``limit`` expired leases, oldest first, each with its retry
        decision and the retry_count it was made from, or (a job handed over
        and never popped) released, with its entry of the hand-over list; and
        how many expired leases were read. Reads only."""
        _, *ids = self._eval(self._lua.expired_leases, self._route, [self._offset(), limit])
        names = ("status", "name", "queue", "worker_id", "lease_token", "retry_count", "max_retries")
        rows = self._pipe(lambda p: [p.hmget(self.keys.job(job_id), names) for job_id in ids])
        handed = self._handed({row[3] for row in rows if row[3]})
        policy_of = self._handler_policies() if ids else None  # type: ignore[attr-defined]
        plan = []
        for job_id, (code, name, queue, worker, token, retries, max_retries) in zip(ids, rows, strict=True):
            if code is None or JobStatus(int(code)) not in lifecycle.sources(Operation.FAIL):
                continue
            token, retries = token or 0, retries or 0  # absent: 0 (codec.job_from_hash)
            if (worker, job_id) in handed:
                job = RecoveredJob(
                    job_id, name, queue, worker, int(token), JobStatus.Scheduled, int(retries), 0.0
                )
                plan.append((job, handed[worker, job_id]))  # released, not failed
                continue
            assert policy_of is not None
            d = lifecycle.decide_failure(int(retries), int(max_retries), policy_of(name))
            job = RecoveredJob(job_id, name, queue, worker, int(token), d.status, d.retry_count, d.delay_s)
            plan.append((job, int(retries)))
        return plan, len(ids)

    def _handed(self, workers: set[str]) -> dict[tuple[str, str], str]:
        """The entries still on the hand-over lists of ``workers``, by
        (worker id, job id): jobs leased to a worker that never popped them."""
        names = sorted(workers)
        lists = self._pipe(lambda p: [p.lrange(self.keys.hand(w), 0, -1) for w in names])
        return {
            (w, job_id): text
            for w, texts in zip(names, lists, strict=True)
            for text in texts
            if (job_id := handed_id(text))
        }

    def _release_handed(self, r: RecoveredJob, entry: str, owner: str) -> bool:
        """Release a job whose hand-over ``entry`` is still on its worker's
        list and take the entry off, in one call (lua/release.lua); False
        when the worker popped it first or the lease changed."""
        args = self._args(*op_args(Operation.RELEASE), r.job_id, r.token, owner, r.worker_id, entry)
        return self._eval(self._lua.release, self._route, args)[0] == 1

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
        items, failing, done = [], [], []
        for r, retries in plan:
            if isinstance(retries, str):  # the hand-over entry: released, not failed
                if self._release_handed(r, retries, owner):
                    done.append(r)
                continue
            decision = FailureDecision(r.outcome, r.retry_count, r.delay_s)
            error = lease_expired_error(r.worker_id, r.token)
            items.append(Failure(r.job_id, r.queue, r.token, retries, decision, error, True, owner))
            failing.append(r)
        replies = self._apply_failures(items, want_jobs=False) if items else []
        return [*done, *(r for r, ok in zip(failing, replies, strict=True) if ok)], read
