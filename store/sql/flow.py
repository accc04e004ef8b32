"""Flow control on the SQL store: limits decided in the claim of a limited
queue, children released or canceled in the transaction that finishes their
parent, batches and chains. Every decision is ``store.flow_rules``'s; this module
reads what it needs and applies the answer atomically.

A limited queue's claim is one transaction: on PostgreSQL it first locks the
queue's row (``SELECT … FOR UPDATE``), so concurrent claims of that queue run
one after another and never both see "2 running < 3"; SQLite's ``BEGIN
IMMEDIATE`` serialises every write already. Unlimited queues never take that
path: the plain claim skips limited queues, and reads their rows only when it
comes back short.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import orjson
from sqlalchemy import Connection

from store import flow_rules as flow
from store.errors import ValidationError
from store.flow_rules import ParentFailure, QueueLimits, Usage
from store.lifecycle import EventKind, JobStatus, Operation, rule
from store.models import Job, JobSpec
from store.spec import check_queue_name
from store.sql import flow_statements as fs
from store.sql.changes import enqueue_values
from store.sql.dependencies import SqlDependencies
from store.sql.plumbing import event_row
from store.sql.rows import job_from_row
from store.sql.schema import jobs, queues

_OPEN = (JobStatus.Queued, JobStatus.Scheduled, JobStatus.InProgress)
#: Seconds a store handle keeps the names of the limited queues before it
#: reads them again (``_limited_queues``): how long a claim by another
#: process may take to reach a queue limited meanwhile.
LIMITED_CACHE_S = 1.0


def limits_of(row: Any) -> QueueLimits:
    """A ``queues`` row's limits; a stored value that no longer passes the
    rule is not applied and named in ``invalid`` (``flow.stored_limits``)."""

    def rate(limit: str, period: str) -> dict[str, Any] | None:
        if row[limit] is None and row[period] is None:
            return None
        return {"limit": row[limit], "period_s": row[period]}

    return flow.stored_limits(
        {
            "concurrency": row["concurrency"],
            "per_key_concurrency": row["per_key_concurrency"],
            "rate": rate("rate_limit", "rate_period_s"),
            "per_key_rate": rate("per_key_rate_limit", "per_key_rate_period_s"),
        }
    )


class SqlFlowPart(SqlDependencies):
    """The flow half of ``SqlStore``."""

    supports_flow = True

    def _flow_init(self) -> None:
        now = self._now  # type: ignore[attr-defined]
        self._pg = self.write_engine.dialect.name == "postgresql"  # type: ignore[attr-defined]
        self._f_unblock = fs.unblock(now)
        self._f_cancel = fs.cancel_child(now)
        self._f_complete = fs.complete_parent(now)
        self._f_prune = fs.prune_starts(now)
        self._f_window = fs.window_starts(now)
        self._f_window_by_key = fs.window_starts_by_key(now)
        self._f_candidates = {keys: fs.limited_candidates(now, self._pg, keys) for keys in (False, True)}
        from store.sql import statements as sql

        self._f_lease = sql.claim_sqlite(now)
        self._retry_after: dict[str, float] = {}
        self._retry_lock = threading.Lock()
        #: (monotonic time read, names of the limited queues): LIMITED_CACHE_S old at most.
        self._limited: tuple[float, frozenset[str]] | None = None

    # ------------------------------------------------------------ limits
    def set_queue_limits(self, queue: str, limits: QueueLimits, *, actor: str = "operator") -> QueueLimits:
        check_queue_name(queue)
        stmt = fs.set_limits(self.dialect.upsert(queues), self._now)  # type: ignore[attr-defined]
        params = {
            "name": queue,
            "actor": actor,
            "limited": int(limits.any),
            "concurrency": limits.concurrency,
            "per_key_concurrency": limits.per_key_concurrency,
            "rate_limit": limits.rate.limit if limits.rate else None,
            "rate_period_s": limits.rate.period_s if limits.rate else None,
            "per_key_rate_limit": limits.per_key_rate.limit if limits.per_key_rate else None,
            "per_key_rate_period_s": limits.per_key_rate.period_s if limits.per_key_rate else None,
        }
        message = f"queue {queue} limits {orjson.dumps(limits.to_json()).decode()}"

        def body(conn: Connection) -> QueueLimits:
            row = conn.execute(stmt, params).mappings().one()
            event = event_row("", EventKind.QUEUE_LIMITS_SET, None, None, actor, None, message)
            self.book(conn, [event])  # type: ignore[attr-defined]
            return limits_of(row)

        try:
            return self.tx(body)  # type: ignore[attr-defined,no-any-return]
        finally:
            self._limited = None  # this handle's next claim reads the limited queues again

    def queue_limits(self) -> dict[str, QueueLimits]:
        return {r["name"]: limits_of(r) for r in self.read(fs.all_limits())}  # type: ignore[attr-defined]

    def _usage(self, conn: Connection, queue: str, limits: QueueLimits, now: float) -> Usage:
        usage = Usage()
        for key, n in conn.execute(fs.running_by_key(), {"q0": queue}).all():
            usage.running += n
            if key is not None:
                usage.running_by_key[key] = n
        if limits.rate:
            params = {"q0": queue, "period": limits.rate.period_s}
            usage.starts, usage.first_start = conn.execute(self._f_window, params).one()
        if limits.per_key_rate:
            params = {"q0": queue, "period": limits.per_key_rate.period_s}
            for key, n, first in conn.execute(self._f_window_by_key, params).all():
                usage.starts_by_key[key] = (n, first)
        return usage

    def limit_usage(self, queue: str) -> Usage:
        def body(conn: Connection) -> Usage:
            row = conn.execute(fs.lock_queue(False), {"q0": queue}).mappings().first()
            limits = limits_of(row) if row is not None else QueueLimits()
            return self._usage(conn, queue, limits, conn.execute(self._q_now).scalar_one())  # type: ignore[attr-defined]

        return self.tx(body, write=False)  # type: ignore[attr-defined,no-any-return]

    def claim_retry_after(self, worker_id: str) -> float | None:
        with self._retry_lock:
            return self._retry_after.pop(worker_id, None)

    def _claim_limited(self, params: dict[str, Any], queues: Sequence[str], wanted: int) -> list[Any]:
        """Claims from the limited ones of ``queues`` (each in its own
        transaction) after a short plain claim: ``store.flow_rules.admit`` decides."""
        limited = self._limited_queues()
        out: list[Any] = []
        retry: float | None = None
        for name in (q for q in queues if q in limited):
            if wanted - len(out) <= 0:
                break
            got, wait = self.tx(lambda conn, q=name: self._claim_queue(conn, q, params, wanted - len(out)))  # type: ignore[attr-defined]
            out.extend(got)
            if wait is not None:
                retry = wait if retry is None else min(retry, wait)
        with self._retry_lock:
            if retry is not None:
                self._retry_after[params["worker_id"]] = retry
            else:
                self._retry_after.pop(params["worker_id"], None)
        return out

    def _limited_queues(self) -> frozenset[str]:
        """The names of the limited queues, read at most every LIMITED_CACHE_S
        seconds (at once after this handle set limits): a claim that found
        fewer jobs than it wanted then costs no read. A stale answer is safe
        both ways: the plain claim skips a queue limited meanwhile (its jobs
        wait LIMITED_CACHE_S at most), and ``_claim_queue`` re-reads the
        queue's row under its lock and leaves a queue no longer limited to
        the plain claim."""
        at, cached = time.monotonic(), self._limited  # one read: set_queue_limits may reset it
        if cached is None or at - cached[0] >= LIMITED_CACHE_S:
            rows = self.read(fs.limited_names())  # type: ignore[attr-defined]
            cached = self._limited = (at, frozenset(r["name"] for r in rows))
        return cached[1]

    def _claim_queue(
        self, conn: Connection, queue: str, params: dict[str, Any], wanted: int
    ) -> tuple[list[Any], float | None]:
        row = conn.execute(fs.lock_queue(self._pg), {"q0": queue}).mappings().first()
        if row is None or row["paused"] or not row["limited"]:
            return [], None
        limits = limits_of(row)
        now = conn.execute(self._q_now).scalar_one()  # type: ignore[attr-defined]
        longest = max((r.period_s for r in (limits.rate, limits.per_key_rate) if r), default=None)
        if longest is not None:
            conn.execute(self._f_prune, {"q0": queue, "period": longest})
        usage = self._usage(conn, queue, limits, now)
        ids, old, retry = self._admit_queue(conn, queue, limits, usage, now, wanted)
        if not ids:
            return [], retry
        leased = conn.execute(self._f_lease, {**params, "ids": ids}).mappings().all()
        if limits.rate or limits.per_key_rate:
            # The window counts the starts the lease stamped (``started_at``,
            # the store's clock when the UPDATE ran), not the decision's
            # ``now``, which is earlier: both sides of the limit read one clock.
            conn.execute(
                fs.insert_starts(),
                [{"queue": queue, "limit_key": r["limit_key"], "at": r["started_at"]} for r in leased],
            )
        to, worker = int(rule(Operation.CLAIM).target), params["worker_id"]
        events = [
            event_row(
                r["id"], EventKind.CLAIMED, old[r["id"]], to, worker, r["lease_token"], queue=r["queue"]
            )
            for r in leased
        ]
        self.book(conn, events)  # type: ignore[attr-defined]
        return list(leased), retry

    def _admit_queue(
        self, conn: Connection, queue: str, limits: QueueLimits, usage: Usage, now: float, wanted: int
    ) -> tuple[list[str], dict[str, Any], float | None]:
        """The due jobs of limited ``queue`` a claim of ``wanted`` leases
        (``flow.admit``, ``usage`` updated), their statuses by id and the
        rate limit's retry-after. Candidates are read a page at a time in
        claim order without the limit keys at their per-key limit; a key
        the admission fills is left out of the next page, so one busy key
        with more waiting jobs than a page never hides another key's job
        (docs/architecture.md, Flow control). Each page past the first
        follows an admission, so there are at most ``wanted`` pages."""
        per_key = QueueLimits(None, limits.per_key_concurrency, None, limits.per_key_rate)
        full = {k for k in {*usage.running_by_key, *usage.starts_by_key} if flow.hold(k, per_key, usage, now)}
        ids: list[str] = []
        old: dict[str, Any] = {}
        retry: float | None = None
        while True:
            limit = wanted * 4 + 16 + len(ids)
            keys = {"full": sorted(full)} if full else {}
            rows = conn.execute(self._f_candidates[bool(full)], {"q0": queue, "limit": limit, **keys}).all()
            fresh = [r for r in rows if r[0] not in old]
            old.update((r[0], r[1]) for r in fresh)
            admission = flow.admit([(r[0], r[2]) for r in fresh], limits, usage, now, wanted - len(ids))
            ids.extend(admission.leased)
            if admission.retry_after_s is not None:
                retry = admission.retry_after_s if retry is None else min(retry, admission.retry_after_s)
            filled = {r[2] for r in fresh if r[2] is not None and flow.hold(r[2], per_key, usage, now)} - full
            if len(ids) >= wanted or len(rows) < limit or not filled or not admission.leased:
                return ids, old, retry
            full |= filled

    def limit_hold(self, job: Job) -> tuple[str, str] | None:
        """The limit that holds a due job of a limited queue now, as
        ``(kind, explanation)`` (``store.flow_rules.hold``), or None."""

        def body(conn: Connection) -> tuple[str, str] | None:
            row = conn.execute(fs.lock_queue(False), {"q0": job.queue}).mappings().first()
            if row is None or not row["limited"]:
                return None
            limits = limits_of(row)
            now = conn.execute(self._q_now).scalar_one()  # type: ignore[attr-defined]
            return flow.hold(job.limit_key, limits, self._usage(conn, job.queue, limits, now), now)

        return self.tx(body, write=False)  # type: ignore[attr-defined,no-any-return]

    # ------------------------------------------------------------ enqueue
    def _flow_row(self, spec: JobSpec, job_id: str | None = None) -> dict[str, Any]:
        row = self._row_for(spec)  # type: ignore[attr-defined]
        if job_id is not None:
            row["id"] = job_id
        row.update(
            limit_key=spec.limit_key,
            batch_id=spec.batch_id,
            pending_parents=None,
            on_parent_failure=(spec.on_parent_failure or ParentFailure.CANCEL.value)
            if spec.depends_on
            else None,
            has_children=0,
            result=None,
            error=None,
        )
        return row

    def _insert_flow(
        self, conn: Connection, rows: list[dict[str, Any]], edges: list[dict[str, Any]]
    ) -> list[Job]:
        """Insert job rows (``_flow_row`` with status, pending_parents and
        has_children decided) and their dependencies, with events and counters."""
        from sqlalchemy import Double, bindparam, insert

        now = self._now  # type: ignore[attr-defined]
        delay, held = bindparam("delay", type_=Double()), bindparam("delay_until", type_=Double())
        stmt = insert(jobs).values(
            **enqueue_values(now, delay, held),
            completed_at=now + bindparam("done_in", type_=Double()),
        )
        created: list[Job] = []
        events = []
        params = [
            {**{k: v for k, v in row.items() if k != "reason"}, "done_in": row.get("done_in")} for row in rows
        ]
        conn.execute(stmt, params)
        if edges:
            conn.execute(fs.insert_edges(), edges)
        ids = [r["id"] for r in rows]
        for i in range(0, len(ids), 500):
            for r in conn.execute(fs.lock_jobs(), {"ids": ids[i : i + 500]}).mappings():
                created.append(job_from_row(r))
        order = {job_id: n for n, job_id in enumerate(ids)}
        created.sort(key=lambda j: order[j.id])
        reasons = {r["id"]: r.get("reason") for r in rows}
        for job in created:
            events.append(
                event_row(
                    job.id,
                    EventKind.ENQUEUED,
                    None,
                    int(job.status),
                    None,
                    0,
                    reasons[job.id],
                    queue=job.queue,
                )
            )
        self.book(conn, events)  # type: ignore[attr-defined]
        return created

    def _decide_new(
        self, conn: Connection, row: dict[str, Any], parents: Sequence[str]
    ) -> list[dict[str, Any]]:
        """Lock the parents of a new child, decide its status
        (``flow.child_status_at_enqueue``), flag the parents, return its edges."""
        unique = sorted(set(parents))
        found = {
            r["id"]: JobStatus(r["status"]) for r in conn.execute(fs.lock_jobs(), {"ids": unique}).mappings()
        }
        missing = [p for p in unique if p not in found]
        if missing:
            raise ValidationError("depends_on", f"no job {missing[0]}")
        change = flow.child_status_at_enqueue(found, ParentFailure(row["on_parent_failure"]))
        self._apply_new(row, change)
        open_parents = [p for p in unique if found[p] not in flow.FINISHED]
        if open_parents:
            conn.execute(fs.mark_parents(), {"ids": open_parents})
        return [
            {"parent_id": p, "child_id": row["id"], "done": int(found[p] in flow.FINISHED)} for p in unique
        ]

    @staticmethod
    def _apply_new(row: dict[str, Any], change: flow.ChildChange) -> None:
        row["status"] = int(change.status or JobStatus.Scheduled)
        row["pending_parents"] = change.pending
        if change.status is JobStatus.Scheduled:
            row["delay"], row["delay_until"] = flow.WAITING_DUE_AT, None
        elif change.status is JobStatus.Canceled:
            row["error"] = {"type": "ParentFailed", "message": change.reason, "traceback": None}
            row["reason"] = change.reason
            row["done_in"] = 0.0

    def _enqueue_flow(self, spec: JobSpec) -> Job:
        def body(conn: Connection) -> Job:
            row = self._flow_row(spec)
            edges = self._decide_new(conn, row, spec.depends_on) if spec.depends_on else []
            return self._insert_flow(conn, [row], edges)[0]

        return self.tx(body)  # type: ignore[attr-defined,no-any-return]
