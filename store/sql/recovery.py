"""Recovery of expired leases in the SQL store (a mixin of ``SqlStore``).

One batch is one transaction: the expired leases are read oldest first with
``FOR UPDATE SKIP LOCKED`` (``Dialect.expired``), each gets its retry
decision from ``lifecycle.decide_failure`` by its handler's policy (the
worker registry's, read just before the transaction: ``_handler_policies``),
and the dialect applies them, each guarded by (InProgress, token, lease
still expired), so concurrent recoverers recover each job once and a lease
renewed meanwhile is left alone. The preview reads without locks and stops
after the decisions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection

from store import lifecycle
from store.models import RecoveredJob, lease_expired_error
from store.parts import Part
from store.sql import statements as sql


class SqlRecoveryPart(Part):
    """The engine half of ``recover_expired``, ``preview_recovery`` and
    ``expired_lease_count``."""

    def _decide(
        self, rows: Sequence[Any], policy_of: Callable[[str], lifecycle.RetryPolicy]
    ) -> list[tuple[Any, lifecycle.FailureDecision]]:
        """Each row with its retry decision, by its handler's policy."""
        return [
            (r, lifecycle.decide_failure(r["retry_count"], r["max_retries"], policy_of(r["name"])))
            for r in rows
        ]

    def _recover(self, limit: int | None, owner: str | None) -> tuple[list[RecoveredJob], int]:
        if limit is None:  # expired_lease_count
            return [], self.tx(lambda c: c.execute(sql.count_expired(self._now)).scalar_one(), write=False)
        if owner is None:  # the preview: reads without locks, stops after the decisions
            rows = self.read(sql.expired_leases(self._now, lock=False), {"limit": limit})
            decided = self._decide(rows, self._handler_policies()) if rows else []  # type: ignore[attr-defined]
            return [_recovered(r, d) for r, d in decided], len(rows)
        # Read before the transaction, not inside it (SQLite holds its write lock there).
        policy_of = self._handler_policies()  # type: ignore[attr-defined]

        def body(conn: Connection) -> tuple[list[RecoveredJob], int]:
            rows = self.dialect.expired(conn, limit)
            plan = [
                (r, d, lease_expired_error(r["worker_id"], r["lease_token"]))
                for r, d in self._decide(rows, policy_of)
            ]
            applied = self.dialect.recover(conn, plan, owner)
            # A parent out of retries fails its waiting children; one retried
            # keeps them waiting (store/flow_rules.py).
            failed = [
                (r["id"], d.status)
                for r, d, _ in plan
                if r["id"] in applied and r["has_children"] and d.status is lifecycle.JobStatus.Failed
            ]
            if failed:
                self._settle(conn, failed, owner)  # type: ignore[attr-defined]
            return [_recovered(r, d) for r, d, _ in plan if r["id"] in applied], len(rows)

        return self.tx(body)


def _recovered(row: Any, decision: lifecycle.FailureDecision) -> RecoveredJob:
    return RecoveredJob(
        job_id=row["id"],
        name=row["name"],
        queue=row["queue"],
        worker_id=row["worker_id"],
        token=row["lease_token"],
        outcome=decision.status,
        retry_count=decision.retry_count,
        delay_s=decision.delay_s,
    )
