"""Expiring jobs in the SQL store (a part of ``SqlStore``): a claim never
leases a job past its ``expires_at`` (``statements.due`` leaves it out), and
a claim that comes back short of its limit ends the expired due jobs of its
queues Canceled with error type Expired (lifecycle.Operation.EXPIRE), their
events and counts in the same transaction, a parent's waiting children
settled as a cancel settles them (store/flow_rules.py).

Deciding only when the claim comes back short keeps a busy queue's claims at
one statement: an expired job skipped by a full claim is never run, and is
decided by the first claim that finds the queue's due work exhausted (an idle
worker's next poll). A job of a paused queue is not due, so it is decided by
the first such claim after the queue resumes. The candidates are read from
the partial index ``leasehold_ix_jobs_expiry`` (Queued or Scheduled jobs
with an expires_at, by queue): a read of an empty range when none expired,
and no write transaction (SQLite's writer lock is not taken).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Select, Update, bindparam, literal_column, select

from store.lifecycle import JobStatus, Operation, expiry_error, rule, source_codes
from store.parts import Part
from store.sql.changes import const, guarded_update
from store.sql.plumbing import event_row
from store.sql.schema import jobs
from store.sql.schema import queues as queue_states

#: Most expired jobs one short claim ends (the rest: the next short claim).
EXPIRE_BATCH = 500


def expired_due(now: ColumnElement[float], queues: int, lock: bool) -> Select:
    """Due Queued or Scheduled jobs of the named queues whose expires_at has
    passed (``lifecycle.is_expired``), queues that are not paused, soonest
    expiry first; with ``lock``, rows another claim holds are skipped (FOR
    UPDATE SKIP LOCKED on PostgreSQL). Params: q0..qN, limit. Returns id,
    status, queue, lease_token, has_children."""
    waiting = jobs.c.status.in_([literal_column(str(code)) for code in source_codes(Operation.EXPIRE)])
    if queues == 1:
        in_queue = jobs.c.queue == bindparam("q0")
    else:
        in_queue = jobs.c.queue.in_([bindparam(f"q{i}") for i in range(queues)])
    paused = select(queue_states.c.name).where(queue_states.c.paused == const(1))
    stmt = (
        select(jobs.c.id, jobs.c.status, jobs.c.queue, jobs.c.lease_token, jobs.c.has_children)
        .where(
            waiting,
            in_queue,
            jobs.c.expires_at.is_not(None),
            jobs.c.expires_at <= now,
            jobs.c.due_at <= now,
            jobs.c.queue.not_in(paused.scalar_subquery()),
        )
        .order_by(jobs.c.expires_at)
        .limit(bindparam("limit"))
    )
    return stmt.with_for_update(skip_locked=True) if lock else stmt


def expire_jobs(now: ColumnElement[float]) -> Update:
    """Operation.EXPIRE on the picked ids, guarded by the table's sources and
    the expiry still passed. Params: ids (expanding), error (a dict).
    Returns id, queue, lease_token."""
    return guarded_update(
        Operation.EXPIRE,
        now,
        where=[jobs.c.id.in_(bindparam("ids", expanding=True)), jobs.c.expires_at <= now],
        values={"error": bindparam("error")},
    ).returning(jobs.c.id, jobs.c.queue, jobs.c.lease_token)


class SqlExpiryPart(Part):
    """``_expire_due``: the expiry half of a SQL claim."""

    def _expire_due(self, queues: Sequence[str], worker_id: str) -> int:
        """End the expired due jobs of ``queues`` (at most EXPIRE_BATCH), the
        claim of ``worker_id`` the actor of their events. Returns how many."""
        params: dict[str, Any] = {f"q{i}": q for i, q in enumerate(queues)}
        params["limit"] = EXPIRE_BATCH
        key = len(queues)
        statements = self.__dict__.setdefault("_q_expiry", {})
        if key not in statements:
            statements[key] = (
                expired_due(self._now, key, lock=False),
                expired_due(self._now, key, lock=True),
                expire_jobs(self._now),
            )
        peek, pick, expire = statements[key]
        if not self.read(peek, params):
            return 0
        kind = rule(Operation.EXPIRE).event
        error = expiry_error()

        def body(conn: Any) -> int:
            rows = {r["id"]: r for r in conn.execute(pick, params).mappings().all()}
            if not rows:
                return 0
            done = conn.execute(expire, {"ids": list(rows), "error": error}).mappings().all()
            target = int(JobStatus.Canceled)
            changes = []
            for r in done:
                old = rows[r["id"]]["status"]
                changes.append(
                    event_row(r["id"], kind, old, target, worker_id, r["lease_token"], None, r["queue"])
                )
            self.book(conn, changes)
            parents = [(r["id"], JobStatus.Canceled) for r in done if rows[r["id"]]["has_children"]]
            if parents:
                self._settle(conn, parents, worker_id)
            return len(done)

        return int(self.tx(body))
