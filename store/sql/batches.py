"""Batches and chains on the SQL store: a group of jobs enqueued in one
transaction (a chain's jobs each wait for the one before), with an optional
callback job that waits for all of them; progress by status; cancel the whole
batch. The dependencies themselves are ``store/sql/flow.py``'s."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection

from store import flow_rules as flow
from store.contract_flow import BATCH_IDS_SHOWN, Batch
from store.errors import JobNotFound
from store.flow_rules import ParentFailure
from store.ids import new_id
from store.lifecycle import EventKind, JobStatus, Operation, sources
from store.models import Job, JobSpec
from store.parts import Part
from store.spec import resolve_times, validate_spec
from store.sql import flow_statements as fs
from store.sql.plumbing import event_row
from store.sql.rows import job_from_row

_OPEN = (JobStatus.Queued, JobStatus.Scheduled, JobStatus.InProgress)
#: Jobs one transaction of ``cancel_batch`` cancels: SQLite has one writer,
#: so a big batch is canceled in short transactions that let other writes in
#: between (docs/architecture.md, "Batches").
CANCEL_CHUNK = 500


class SqlBatchesPart(Part):
    """The batch half of ``SqlStore``'s flow control (``SqlFlowPart`` builds on it)."""

    def create_batch(
        self, specs: Sequence[JobSpec], callback: JobSpec | None = None, *, kind: str = "batch"
    ) -> Batch:
        flow.check_batch(specs, kind)
        checked = resolve_times([validate_spec(s) for s in specs], self.now)  # type: ignore[attr-defined]
        if callback is not None:
            [callback] = resolve_times([validate_spec(callback)], self.now)  # type: ignore[attr-defined]
        batch_id = new_id()
        rows = [self._flow_row(replace(s, batch_id=batch_id)) for s in checked]
        edges: list[dict[str, Any]] = []
        if kind == "chain":
            for before, row in itertools.pairwise(rows):
                row["on_parent_failure"] = ParentFailure.CANCEL.value
                self._apply_new(row, flow.ChildChange(1, JobStatus.Scheduled))
                before["has_children"] = 1
                edges.append({"parent_id": before["id"], "child_id": row["id"], "done": 0})
        callback_id = None
        if callback is not None:
            cb = self._flow_row(
                replace(callback, on_parent_failure=callback.on_parent_failure or "run", depends_on=())
            )
            cb["on_parent_failure"] = cb["on_parent_failure"] or ParentFailure.RUN.value
            self._apply_new(cb, flow.ChildChange(len(rows), JobStatus.Scheduled))
            for row in rows:
                row["has_children"] = 1
                edges.append({"parent_id": row["id"], "child_id": cb["id"], "done": 0})
            rows.append(cb)
            callback_id = cb["id"]

        def body(conn: Connection) -> Batch:
            now = conn.execute(self._q_now).scalar_one()  # type: ignore[attr-defined]
            conn.execute(
                fs.insert_batch(),
                {
                    "id": batch_id,
                    "kind": kind,
                    "size": len(checked),
                    "callback_job_id": callback_id,
                    "created_at": now,
                },
            )
            self._insert_flow(conn, rows, edges)
            return self._batch(conn, batch_id)

        return self.tx(body)  # type: ignore[attr-defined,no-any-return]

    def _batch(self, conn: Connection, batch_id: str) -> Batch:
        row = conn.execute(fs.batch_by_id(), {"b_id": batch_id}).mappings().first()
        if row is None:
            raise JobNotFound(batch_id)
        counts = {
            JobStatus(status).name: n
            for status, n in conn.execute(fs.batch_counts(), {"b_id": batch_id}).all()
        }
        finished = not any(counts.get(s.name) for s in _OPEN)
        ids = conn.execute(fs.batch_job_ids(), {"b_id": batch_id, "limit": BATCH_IDS_SHOWN}).scalars()
        return Batch(
            id=row["id"],
            kind=row["kind"],
            size=row["size"],
            callback_job_id=row["callback_job_id"],
            counts=counts,
            finished=finished,
            created_at=row["created_at"],
            canceled_at=row["canceled_at"],
            canceled_by=row["canceled_by"],
            job_ids=list(ids),
        )

    def get_batch(self, batch_id: str) -> Batch:
        return self.tx(lambda conn: self._batch(conn, batch_id), write=False)  # type: ignore[attr-defined,no-any-return]

    def batch_jobs(self, batch_id: str, limit: int = 100) -> list[Job]:
        return [job_from_row(r) for r in self.read(fs.batch_jobs(), {"b_id": batch_id, "limit": limit})]  # type: ignore[attr-defined]

    def cancel_batch(self, batch_id: str, *, actor: str = "operator") -> Batch:
        """Cancel the batch's unfinished jobs CANCEL_CHUNK a transaction (each
        chunk atomic; a job claimed between two chunks is canceled by a later
        one: jobs join a batch only when it is created), then its callback,
        its mark and audit entry in a last one."""
        self.tx(lambda conn: self._batch(conn, batch_id), write=False)  # type: ignore[attr-defined]
        total = 0

        def chunk(conn: Connection) -> int:
            ids = list(conn.execute(fs.batch_open_ids(), {"b_id": batch_id, "limit": CANCEL_CHUNK}).scalars())
            self._cancel_locked(conn, ids, actor)
            return len(ids)

        while n := self.tx(chunk):  # type: ignore[attr-defined]
            total += n

        def last(conn: Connection) -> Batch:
            batch = self._batch(conn, batch_id)
            if batch.callback_job_id:
                self._cancel_locked(conn, [batch.callback_job_id], actor)
            conn.execute(fs.mark_batch_canceled(self._now), {"b_id": batch_id, "actor": actor})  # type: ignore[attr-defined]
            n = total + (1 if batch.callback_job_id else 0)
            event = event_row(
                "", EventKind.BATCH_CANCELED, None, None, actor, None, f"batch {batch_id}: {n} jobs"
            )
            self.book(conn, [event])  # type: ignore[attr-defined]
            return self._batch(conn, batch_id)

        return self.tx(last)  # type: ignore[attr-defined,no-any-return]

    def _cancel_locked(self, conn: Connection, ids: Sequence[str], actor: str) -> None:
        finished: list[tuple[str, JobStatus]] = []
        events = []
        for row in conn.execute(fs.lock_jobs(), {"ids": list(ids)}).mappings().all():
            old = JobStatus(row["status"])
            if old not in sources(Operation.CANCEL) or old in (JobStatus.Completed, JobStatus.Failed):
                continue
            params = {"j_id": row["id"], "pending": row["pending_parents"], "reason": row["error"]}
            job = job_from_row(conn.execute(self._f_cancel, params).mappings().one())
            events.append(
                event_row(
                    job.id,
                    EventKind.CANCELED,
                    int(old),
                    int(job.status),
                    actor,
                    row["lease_token"],
                    "batch canceled",
                    job.queue,
                )
            )
            if row["has_children"]:
                finished.append((job.id, JobStatus.Canceled))
        self.book(conn, events)  # type: ignore[attr-defined]
        self._settle(conn, finished, actor)
