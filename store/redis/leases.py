"""The Redis engine's lease part: what a worker does with the jobs it runs
(claim, heartbeat, ack, the ack that claims the next jobs, progress, nack,
release), each one function call fenced by the job's lease token inside it
(docs/architecture.md, "Leases and fencing"; lua/claim.lua, lua/complete.lua,
lua/complete_claim.lua, lua/heartbeat.lua, lua/progress.lua,
lua/apply_failures.lua, lua/release.lua).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from store import lifecycle
from store.base import MAX_BATCH, JobStore, Notice
from store.contract_operating import ProgressReport
from store.errors import JobNotFound, LeaseLost, ValidationError
from store.lifecycle import EventKind, JobStatus, Operation
from store.models import HeartbeatResult, Job, Lease, progress_value, ts
from store.parts import Part
from store.redis import codec
from store.redis.plumbing import GUARD_ATTEMPTS, SCRIPT_BATCH, Failure, chunks, op_args, refusal
from store.shared import CheckedProgress, EncodedAck, encode_results
from store.spec import clean_error


class RedisLeasesPart(Part):
    """Claim, heartbeat, ack (``_complete``, ``complete_and_claim``),
    progress, nack (``fail``) and release on Redis and Redis Cluster."""

    def claim(
        self, worker_id: str, queues: Sequence[str], limit: int = 1, lease_ttl_s: float | None = None
    ) -> list[Job]:
        """One function call (lua/claim.lua) per SCRIPT_BATCH jobs: due
        scheduled jobs promoted, paused queues skipped, the ready heads taken
        in claim order across ``queues`` and leased, the jobs returned."""
        if not queues:
            raise ValidationError("queues", "name at least one queue")
        if limit < 1:
            return []
        limit = min(limit, MAX_BATCH)
        ttl = lease_ttl_s or self.settings.lease_ttl_s
        names = list(dict.fromkeys(queues))
        claimed: list[Job] = []
        while len(claimed) < limit:
            want = min(limit - len(claimed), SCRIPT_BATCH)
            jobs = self._lease(worker_id, want, ttl, "", names)
            claimed += jobs
            if len(jobs) < want:
                break  # no more due jobs
        return claimed

    def claim_notified(self, worker_id: str, notice: Notice, lease_ttl_s: float | None = None) -> list[Job]:
        """See JobStore.claim_notified: ``notice.job`` is the job's ready-zset
        member (lua/enqueue.lua pushes it on the wake-up list), leased alone by
        lua/claim.lua (one round trip)."""
        if not notice.job:
            return []
        ttl = lease_ttl_s or self.settings.lease_ttl_s
        return self._lease(worker_id, 1, ttl, notice.job, [notice.queue])

    def _lease(self, worker_id: str, want: int, ttl: float, member: str, queues: Sequence[str]) -> list[Job]:
        """lua/claim.lua: lease up to ``want`` due jobs of ``queues``, or only
        the ready ``member`` (of ``queues[0]``) when one is named."""
        args = self._args(*op_args(Operation.CLAIM), worker_id, ttl, want, SCRIPT_BATCH, member, *queues)
        replies = self._note_retry(worker_id, self._eval(self._lua.claim, self._route, args))
        return [codec.claimed_job(entry, worker_id) for entry in replies]

    def heartbeat(
        self, worker_id: str, leases: Sequence[Lease], lease_ttl_s: float | None = None
    ) -> HeartbeatResult:
        ttl = lease_ttl_s or self.settings.lease_ttl_s
        renewed, refused, stale = [], [], []
        for chunk in chunks(leases):
            args = [self._offset(), ttl, int(JobStatus.InProgress)]
            for lease in chunk:
                args += [lease.job_id, lease.token]
            for lease, reply in zip(chunk, self._eval(self._lua.heartbeat, self._route, args), strict=True):
                if reply[0] == 1:
                    renewed.append(Lease(lease.job_id, lease.token, ts(float(reply[1]))))
                    continue
                refused.append(lease)
                if reply[0] == 0:
                    stale.append((lease.job_id, lease.token, reply[1], reply[2]))
        self._refusals(EventKind.HEARTBEAT_REFUSED, worker_id, stale)
        return HeartbeatResult(renewed, refused)

    def _complete(
        self, acks: Sequence[EncodedAck], worker_id: str | None, return_jobs: bool
    ) -> list[Job | LeaseLost | None]:
        """One script call per SCRIPT_BATCH acks, plus one to record refusals
        when there are any. A None result is stored as JSON ``null``."""
        out: list[Job | LeaseLost | None] = []
        want = 1 if return_jobs else 0
        for chunk in chunks(acks):
            args = self._args(*op_args(Operation.COMPLETE), worker_id or "", want)
            for job_id, token, text in chunk:
                args += [job_id, token, codec.NULL if text is None else text, ""]
            replies = self._eval(self._lua.complete, self._route, args)
            for (job_id, _, _), outcome in zip(
                chunk, self._ack_outcomes(chunk, replies, worker_id), strict=True
            ):
                out.append(codec.job_from_flat(job_id, outcome) if isinstance(outcome, list) else outcome)
        return out

    def _ack_outcomes(
        self, acks: Sequence[EncodedAck], replies: list[Any], worker_id: str | None
    ) -> list[Any]:
        """Per ack of lua/complete.lua's ``replies``: the completed job's flat
        array (None when not returned), or its LeaseLost, the refusals
        recorded (one call when there are any)."""
        stale = [(a[0], a[1], r[1], r[2]) for a, r in zip(acks, replies, strict=True) if r[0] == 0]
        lost = iter(self._refusals(refusal(Operation.COMPLETE), worker_id, stale))
        out: list[Any] = []
        for (job_id, token, _), reply in zip(acks, replies, strict=True):
            if reply[0] == 1:
                out.append(reply[1] if len(reply) > 1 else None)
            else:
                out.append(next(lost) if reply[0] == 0 else LeaseLost(job_id, token, None, None))
        return out

    def complete_and_claim(
        self,
        acks: Sequence[tuple[str, int, Any]],
        worker_id: str,
        queues: Sequence[Sequence[str]],
        limit: int,
        lease_ttl_s: float | None = None,
        progress: Sequence[ProgressReport] = (),
    ) -> tuple[list[LeaseLost | None], list[Job]]:
        """See JobStore.complete_and_claim: one call of lua/complete_claim.lua
        (acks, their progress reports and the claim in one atomic step), plus
        one to record refusals when there are any. Queue groups past the
        second, more than SCRIPT_BATCH acks or jobs, fall back to the calls
        one after another."""
        groups = [list(dict.fromkeys(g)) for g in queues if g]
        if len(acks) > SCRIPT_BATCH or limit > SCRIPT_BATCH or len(groups) > 2:
            return JobStore.complete_and_claim(
                self._engine, acks, worker_id, queues, limit, lease_ttl_s, progress
            )
        if limit > 0 and not groups:
            raise ValidationError("queues", "name at least one queue")
        encoded = encode_results(acks)
        reports = {(job_id, token): progress_value(f, m) for job_id, token, f, m in progress}
        if set(reports) - {(job_id, token) for job_id, token, _ in encoded}:
            raise ValidationError("progress", "every report must be of a run being acked")
        ttl = lease_ttl_s or self.settings.lease_ttl_s
        first = groups[0] if groups else []
        args = self._args(*op_args(Operation.COMPLETE), *op_args(Operation.CLAIM), worker_id, ttl)
        args += [max(limit, 0) if groups else 0, SCRIPT_BATCH, len(encoded)]
        for job_id, token, text in encoded:
            report = reports.get((job_id, token))
            args += [
                job_id,
                token,
                codec.NULL if text is None else text,
                "" if report is None else codec.dumps(report),
            ]
        args += [len(first), *first, *(groups[1] if len(groups) > 1 else [])]
        replies, flats = self._eval(self._lua.complete_claim, self._route, args)
        outcomes = self._ack_outcomes(encoded, replies, worker_id)
        return [o if isinstance(o, LeaseLost) else None for o in outcomes], [
            codec.claimed_job(entry, worker_id) for entry in flats
        ]

    def _report_progress(
        self, reports: Sequence[CheckedProgress], worker_id: str | None
    ) -> list[LeaseLost | None]:
        """One script call (lua/progress.lua) per SCRIPT_BATCH reports, each
        fenced by (InProgress, token), plus one to record refusals when there
        are any (like stale heartbeats)."""
        out: list[LeaseLost | None] = []
        for chunk in chunks(reports):
            args: list[Any] = [self._offset(), int(JobStatus.InProgress)]
            for job_id, token, value in chunk:
                args += [job_id, token, codec.dumps(value)]
            replies = self._eval(self._lua.progress, self._route, args)
            stale = [(r[0], r[1], x[1], x[2]) for r, x in zip(chunk, replies, strict=True) if x[0] == 0]
            lost = iter(self._refusals(EventKind.PROGRESS_REFUSED, worker_id, stale))
            for (job_id, token, _), reply in zip(chunk, replies, strict=True):
                if reply[0] == 1:
                    out.append(None)
                else:
                    out.append(next(lost) if reply[0] == 0 else LeaseLost(job_id, token, None, None))
        return out

    def fail(
        self,
        job_id: str,
        token: int,
        error: dict[str, Any],
        *,
        permanent: bool = False,
        worker_id: str | None = None,
        again: lifecycle.RunAgain | None = None,
        policy: lifecycle.RetryPolicy | None = None,
    ) -> Job:
        """See JobStore.fail: read, decide (lifecycle.decide_failure), apply as
        compare-and-set; re-read up to GUARD_ATTEMPTS times if the job changed.
        A snooze reads the job's attempts first to count its snoozes."""
        error = clean_error(error)
        for _ in range(GUARD_ATTEMPTS):
            code, current, retries, max_retries, queue = self._fields(
                job_id, "status", "lease_token", "retry_count", "max_retries", "queue"
            )
            if code is None:
                raise JobNotFound(job_id)
            current, retries = current or "0", retries or "0"  # absent: 0 (codec.job_from_hash)
            if JobStatus(int(code)) not in lifecycle.sources(Operation.FAIL) or int(current) != token:
                raise self._refusals(refusal(Operation.FAIL), worker_id, [(job_id, token, current, code)])[0]
            snoozes = 0
            if again is not None and again.snooze:
                snoozes = lifecycle.count_snoozes((a.error or {}).get("type") for a in self.attempts(job_id))
            decision = lifecycle.decide_failure(
                int(retries),
                int(max_retries),
                policy or self.settings.retry,
                permanent=permanent,
                again=again,
                snoozes=snoozes,
            )
            item = Failure(job_id, queue, token, int(retries), decision, error, False, worker_id)
            [reply] = self._apply_failures([item], want_jobs=True)
            if reply:
                return codec.job_from_flat(job_id, reply)
        raise LeaseLost(job_id, token, None, None)  # the job changed under every attempt

    def release(self, job_id: str, token: int, worker_id: str | None = None) -> Job:
        args = self._args(*op_args(Operation.RELEASE), job_id, token, worker_id or "")
        reply = self._eval(self._lua.release, self._route, args)
        if reply[0] == 1:
            return codec.job_from_flat(job_id, reply[1])
        if reply[0] == -1:
            raise JobNotFound(job_id)
        raise self._refusals(refusal(Operation.RELEASE), worker_id, [(job_id, token, reply[1], reply[2])])[0]
