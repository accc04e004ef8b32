"""The SQL engine's lease part: what a worker does with the jobs it runs
(claim, heartbeat, ack, nack, release), each one transaction fenced by the
job's lease token (docs/architecture.md, "Leases and fencing"). The claim's
statement is the dialect's (sqlite.py, postgres.py); flow-limited queues are
claimed by the flow part (flow.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from store import lifecycle
from store.base import MAX_BATCH, Notice
from store.errors import JobNotFound, LeaseLost, ValidationError
from store.lifecycle import EventKind, JobStatus, Operation, rule
from store.models import HeartbeatResult, Job, Lease, ts
from store.parts import Part
from store.shared import CheckedProgress, EncodedAck
from store.spec import clean_error
from store.sql import operating_statements as ops
from store.sql import statements as sql
from store.sql.plumbing import Refused, event_row
from store.sql.rows import job_from_row


class SqlLeasesPart(Part):
    """Claim, heartbeat, ack (``_complete``), progress, nack (``fail``) and
    release on SQLite and PostgreSQL."""

    def claim(
        self, worker_id: str, queues: Sequence[str], limit: int = 1, lease_ttl_s: float | None = None
    ) -> list[Job]:
        if not queues:
            raise ValidationError("queues", "name at least one queue")
        if limit < 1:
            return []
        params: dict[str, Any] = {f"q{i}": q for i, q in enumerate(queues)}
        params.update(
            limit=min(limit, MAX_BATCH), worker_id=worker_id, ttl=lease_ttl_s or self.settings.lease_ttl_s
        )
        rows = self.dialect.claim(params, len(queues))
        if len(rows) < params["limit"]:  # limited queues are claimed apart (store/sql/flow.py)
            rows = [*rows, *self._claim_limited(params, queues, params["limit"] - len(rows))]
        if len(rows) < params["limit"]:  # short: the expired due jobs are decided (store/sql/expiry.py)
            self._expire_due(queues, worker_id)
        # RETURNING order is unspecified: hand jobs out in claim order.
        rows = sorted(rows, key=lambda r: (-r["priority"], r["due_at"], r["id"]))
        return [job_from_row(r) for r in rows]

    def claim_notified(self, worker_id: str, notice: Notice, lease_ttl_s: float | None = None) -> list[Job]:
        """See JobStore.claim_notified: ``notice.job`` is the job's id
        (PostgreSQL's JOB_CHANNEL, store/sql/wakeups.py), leased alone by the
        claim's statement restricted to it ([] when another worker took it or
        its queue is paused); a queue with limits is claimed as ``claim``
        claims it, one job, the next its limits admit (the statement by id
        leaves limited queues out: ``statements.due``)."""
        if not notice.job:
            return []
        if notice.queue in self._limited_queues():
            return self.claim(worker_id, [notice.queue], 1, lease_ttl_s)
        params = {
            "q0": notice.queue,
            "job": notice.job,
            "limit": 1,
            "worker_id": worker_id,
            "ttl": lease_ttl_s or self.settings.lease_ttl_s,
        }
        return [job_from_row(r) for r in self.dialect.claim(params, 1)]

    def heartbeat(
        self, worker_id: str, leases: Sequence[Lease], lease_ttl_s: float | None = None
    ) -> HeartbeatResult:
        """See JobStore.heartbeat. PostgreSQL skips job rows another
        transaction holds and reports them ``deferred`` when still valid."""
        if not leases:
            return HeartbeatResult([], [])
        pairs = [(lease.job_id, lease.token) for lease in leases]
        ttl = lease_ttl_s or self.settings.lease_ttl_s

        def body(conn: Connection) -> HeartbeatResult:
            rows = conn.execute(self._q_renew, {"pairs": pairs, "ttl": ttl}).all()
            renewed = [Lease(r[0], r[1], ts(r[2])) for r in rows]
            done = {(r[0], r[1]) for r in rows}
            missed = [lease for lease in leases if (lease.job_id, lease.token) not in done]
            live = self.dialect.live(conn, missed) if missed else set()
            deferred = [lease for lease in missed if lease.job_id in live]
            refused = [lease for lease in missed if lease.job_id not in live]
            self.refuse(conn, refused, lifecycle.EventKind.HEARTBEAT_REFUSED, worker_id)
            return HeartbeatResult(renewed, refused, deferred)

        return self.tx(body)

    def _complete(
        self, acks: Sequence[EncodedAck], worker_id: str | None, return_jobs: bool
    ) -> list[Job | LeaseLost | None]:
        done = self.dialect.complete(acks, worker_id, return_jobs)
        kind = rule(Operation.COMPLETE).refusal
        assert kind is not None
        left = [a for a in acks if (a[0], a[1]) not in done]

        def rest(conn: Connection) -> dict[tuple[str, int], LeaseLost]:
            # Jobs others wait for are completed here, their children released
            # in the same transaction; what is still left was refused.
            parents = self._complete_parents(conn, left, worker_id)
            done.update({k: v if return_jobs else None for k, v in parents.items()})
            refused = [Lease(a[0], a[1]) for a in left if (a[0], a[1]) not in parents]
            return self.refuse(conn, refused, kind, worker_id) if refused else {}

        lost = self.tx(rest) if left else {}
        return [done[key] if (key := (a[0], a[1])) in done else lost[key] for a in acks]

    def _report_progress(
        self, reports: Sequence[CheckedProgress], worker_id: str | None
    ) -> list[LeaseLost | None]:
        """The writes as one atomic unit (``Dialect.set_progress``), then the
        refusals recorded in a transaction of their own when there are any."""
        written = self.dialect.set_progress(reports)
        refused = [Lease(r[0], r[1]) for r in reports if (r[0], r[1]) not in written]
        lost = (
            self.tx(lambda c: self.refuse(c, refused, EventKind.PROGRESS_REFUSED, worker_id))
            if refused
            else {}
        )
        return [None if (key := (r[0], r[1])) in written else lost[key] for r in reports]

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
        refusal = rule(Operation.FAIL).refusal
        assert refusal is not None
        error = clean_error(error)

        def body(conn: Connection) -> Job:
            row = conn.execute(sql.lock_job_for_update(), {"j_id": job_id}).mappings().first()
            if row is None:
                raise JobNotFound(job_id)
            if (
                JobStatus(row["status"]) not in lifecycle.sources(Operation.FAIL)
                or row["lease_token"] != token
            ):
                raise Refused(job_id, token, refusal, worker_id)
            snoozes = 0
            if again is not None and again.snooze:
                found = conn.execute(ops.attempts_of(), {"job_id": job_id}).mappings()
                snoozes = lifecycle.count_snoozes((r["error"] or {}).get("type") for r in found)
            decision = lifecycle.decide_failure(
                row["retry_count"],
                row["max_retries"],
                policy or self.settings.retry,
                permanent=permanent,
                again=again,
                snoozes=snoozes,
            )
            job = self.apply_decision(
                conn, self._q_fail, row, decision, error, expired=False, actor=worker_id
            )
            if job is None:  # pragma: no cover - the row is locked, the guard cannot fail
                raise Refused(job_id, token, refusal, worker_id)
            if row["has_children"] and job.status is JobStatus.Failed:
                self._settle(conn, [(job_id, JobStatus.Failed)], worker_id)
            return job

        try:
            return self.tx(body)
        except Refused as refused:
            raise self.refusal(refused) from None

    def release(self, job_id: str, token: int, worker_id: str | None = None) -> Job:
        op = rule(Operation.RELEASE)
        assert op.event is not None and op.refusal is not None

        def body(conn: Connection) -> Job:
            found = conn.execute(self._q_release, {"j_id": job_id, "token": token}).mappings().first()
            if found is None:
                raise Refused(job_id, token, op.refusal, worker_id)
            job = job_from_row(found)
            event = event_row(
                job_id,
                op.event,
                int(JobStatus.InProgress),
                int(job.status),
                worker_id,
                token,
                queue=job.queue,
            )
            self.book(conn, [event])
            return job

        try:
            return self.tx(body)
        except Refused as refused:
            raise self.refusal(refused) from None
