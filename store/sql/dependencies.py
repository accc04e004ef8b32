"""Dependencies on the SQL store: a finished parent's waiting children
released or canceled in the transaction that finishes it (the decision is
``store.flow_rules.on_parent_finished``), a parent's ack that is not the
plain ack's (``_complete_parents``), and the reads of a job's parents and
children. A base of the flow part (store/sql/flow.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from sqlalchemy import Connection

from store import flow_rules as flow
from store.flow_rules import ParentFailure
from store.handler_metrics import SUCCEEDED
from store.lifecycle import EventKind, JobStatus, Operation, rule
from store.models import Job
from store.sql import flow_statements as fs
from store.sql.batches import SqlBatchesPart
from store.sql.handler_minutes import count_outcomes
from store.sql.plumbing import event_row
from store.sql.rows import job_from_row
from store.sql.schema import handler_minutes
from store.sql.wakeups import WAKEUP_CHANNEL


class SqlDependencies(SqlBatchesPart):
    """Parents and children of the flow part."""

    def _settle(self, conn: Connection, finished: Sequence[tuple[str, JobStatus]], actor: str | None) -> None:
        """Apply parents' ends to their waiting children (``flow.on_parent_finished``),
        in the caller's transaction: a child whose last parent finished is
        Queued (UNBLOCK); one canceled by its parent's failure passes the
        cancel on to its own children."""
        work = list(finished)
        ready: set[str] = set()
        events: list[dict[str, Any]] = []
        while work:
            parent_id, outcome = work.pop(0)
            child_ids = list(conn.execute(fs.open_children(), {"p_id": parent_id}).scalars())
            if not child_ids:
                continue
            conn.execute(fs.close_edges(), {"p_id": parent_id})
            for row in conn.execute(fs.lock_jobs(), {"ids": child_ids}).mappings().all():
                policy = ParentFailure(row["on_parent_failure"] or ParentFailure.CANCEL.value)
                change = flow.on_parent_finished(
                    JobStatus(row["status"]), row["pending_parents"] or 0, parent_id, outcome, policy
                )
                if change is None:
                    continue
                params: dict[str, Any] = {"j_id": row["id"], "pending": change.pending}
                if change.status is None:
                    conn.execute(fs.set_pending(), params)
                    continue
                if change.status is JobStatus.Queued:
                    job = job_from_row(conn.execute(self._f_unblock, params).mappings().one())
                    kind, message = EventKind.DEPENDENCIES_MET, f"parent {parent_id} ended {outcome.name}"
                    ready.add(job.queue)
                else:
                    params["reason"] = {"type": "ParentFailed", "message": change.reason, "traceback": None}
                    job = job_from_row(conn.execute(self._f_cancel, params).mappings().one())
                    kind, message = EventKind.CANCELED, change.reason
                    if row["has_children"]:
                        work.append((job.id, JobStatus.Canceled))
                token = row["lease_token"]
                events.append(
                    event_row(
                        job.id,
                        kind,
                        int(JobStatus.Scheduled),
                        int(job.status),
                        actor,
                        token,
                        message,
                        job.queue,
                    )
                )
        if events:
            self.book(conn, events)  # type: ignore[attr-defined]
        if ready and self._pg:  # idle PostgreSQL workers LISTEN: wake them as an enqueue does
            for queue in sorted(ready):
                conn.execute(fs.notify(), {"channel": WAKEUP_CHANNEL, "queue": queue})

    def _complete_parents(
        self, conn: Connection, acks: Sequence[tuple[str, int, str | None]], worker_id: str | None
    ) -> dict[tuple[str, int], Job]:
        """Acks the fast statement left because others wait for the job: each
        completed (guarded by status and token) and its children released,
        in this transaction. Returns the acks applied."""
        done: dict[tuple[str, int], Job] = {}
        events = []
        finished: list[tuple[str, JobStatus]] = []
        outcomes = []
        kind = rule(Operation.COMPLETE).event
        assert kind is not None
        for job_id, token, text in sorted(acks):
            params = {
                "j_id": job_id,
                "token": token,
                "new_result": None if text is None else orjson.loads(text),
            }
            found = conn.execute(self._f_complete, params).mappings().first()
            if found is None:
                continue
            job = job_from_row(found)
            done[(job_id, token)] = job
            events.append(
                event_row(
                    job_id,
                    kind,
                    int(JobStatus.InProgress),
                    int(job.status),
                    worker_id,
                    token,
                    queue=job.queue,
                )
            )
            finished.append((job_id, JobStatus.Completed))
            outcomes.append((found["name"], found["last_updated_at"], found["started_at"], SUCCEEDED))
        self.book(conn, events)  # type: ignore[attr-defined]
        dialect = self.dialect  # type: ignore[attr-defined]
        count_outcomes(conn, dialect.upsert(handler_minutes), outcomes, dialect.shard)
        self._settle(conn, finished, worker_id)
        return done

    def parents(self, job_id: str) -> list[Job]:
        return [job_from_row(r) for r in self.read(fs.parents_of(), {"j_id": job_id})]  # type: ignore[attr-defined]

    def children(self, job_id: str, limit: int = 100) -> list[Job]:
        return [job_from_row(r) for r in self.read(fs.children_of(), {"j_id": job_id, "limit": limit})]  # type: ignore[attr-defined]
