"""Named SQL statements of flow control (limits, dependencies, batches),
same conventions as ``statements.py``: one function each, bind parameters
named in the docstring, built once by ``store/sql/flow.py``."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    ColumnElement,
    Delete,
    Double,
    Insert,
    Select,
    Text,
    Update,
    bindparam,
    delete,
    exists,
    func,
    insert,
    select,
    update,
)

from store.lifecycle import JobStatus, Operation
from store.sql.changes import const, guarded_update
from store.sql.schema import batches, job_deps, jobs, queues, rate_starts
from store.sql.statements import due

IN_PROGRESS = int(JobStatus.InProgress)


def limited_names() -> Select:
    """The names of the limited queues. No parameters."""
    return select(queues.c.name).where(queues.c.limited == const(1))


def all_limits() -> Select:
    """Every limited queue's row. No parameters."""
    return select(queues).where(queues.c.limited == const(1)).order_by(queues.c.name)


def lock_queue(for_update: bool) -> Select:
    """One queue's row, locked on PostgreSQL (serialises the claims of a
    limited queue). Params: q0."""
    stmt = select(queues).where(queues.c.name == bindparam("q0"))
    return stmt.with_for_update() if for_update else stmt


def set_limits(ins: Insert, now: ColumnElement[float]) -> Insert:
    """Upsert a queue's limits (``ins`` is the dialect's insert of
    ``queues``). Params: name, actor, limited, concurrency,
    per_key_concurrency, rate_limit, rate_period_s, per_key_rate_limit,
    per_key_rate_period_s."""
    cols = (
        "limited",
        "concurrency",
        "per_key_concurrency",
        "rate_limit",
        "rate_period_s",
        "per_key_rate_limit",
        "per_key_rate_period_s",
    )
    values = {c: bindparam(c) for c in cols}
    stmt = ins.values(
        name=bindparam("name"), paused=const(0), changed_by=bindparam("actor"), changed_at=now, **values
    )
    return stmt.on_conflict_do_update(  # type: ignore[attr-defined,no-any-return]
        index_elements=[queues.c.name], set_={**values, "changed_by": bindparam("actor"), "changed_at": now}
    ).returning(queues)


def running_by_key() -> Select:
    """InProgress jobs of a queue by limit key (the lease index holds only
    InProgress rows: as many as the workers' slots). Params: q0."""
    return (
        select(jobs.c.limit_key, func.count())
        .where(jobs.c.status == const(IN_PROGRESS), jobs.c.queue == bindparam("q0"))
        .group_by(jobs.c.limit_key)
    )


def prune_starts(now: ColumnElement[float]) -> Delete:
    """Drop starts older than the longest window. Params: q0, period."""
    return delete(rate_starts).where(
        rate_starts.c.queue == bindparam("q0"), rate_starts.c.at <= now - bindparam("period", type_=Double())
    )


def window_starts(now: ColumnElement[float]) -> Select:
    """A queue's starts in its window: how many, and the oldest. Params: q0, period."""
    return select(func.count(), func.min(rate_starts.c.at)).where(
        rate_starts.c.queue == bindparam("q0"), rate_starts.c.at > now - bindparam("period", type_=Double())
    )


def window_starts_by_key(now: ColumnElement[float]) -> Select:
    """A queue's starts in the per-key window by limit key: key, how many, the
    oldest. Params: q0, period."""
    return (
        select(rate_starts.c.limit_key, func.count(), func.min(rate_starts.c.at))
        .where(
            rate_starts.c.queue == bindparam("q0"),
            rate_starts.c.limit_key.is_not(None),
            rate_starts.c.at > now - bindparam("period", type_=Double()),
        )
        .group_by(rate_starts.c.limit_key)
    )


def insert_starts() -> Insert:
    """Record starts (executemany). Params: queue, limit_key, at."""
    return insert(rate_starts)


def limited_candidates(now: ColumnElement[float], skip_locked: bool, exclude_keys: bool) -> Select:
    """Due jobs of one limited queue in claim order, without the limit keys
    already at a per-key limit. Params: q0, limit, full (expanding, with
    ``exclude_keys``)."""
    stmt = due(select(jobs.c.id, jobs.c.status, jobs.c.limit_key), now, 1, limited=True)
    if exclude_keys:
        stmt = stmt.where(
            (jobs.c.limit_key.is_(None)) | jobs.c.limit_key.not_in(bindparam("full", expanding=True))
        )
    return stmt.with_for_update(skip_locked=True) if skip_locked else stmt


def lock_jobs() -> Select:
    """Jobs locked for a read-decide-write change, in id order (a fixed lock
    order). Params: ids (expanding)."""
    return (
        select(jobs)
        .where(jobs.c.id.in_(bindparam("ids", expanding=True)))
        .order_by(jobs.c.id)
        .with_for_update()
    )


def mark_parents() -> Update:
    """Flag parents that a job now waits for: their acks take the path that
    releases children. Params: ids (expanding)."""
    return (
        update(jobs)
        .where(jobs.c.id.in_(bindparam("ids", expanding=True)), jobs.c.has_children == const(0))
        .values(has_children=const(1))
    )


def insert_edges() -> Insert:
    """Dependencies (executemany). Params: parent_id, child_id, done."""
    return insert(job_deps)


def open_children() -> Select:
    """Children still waiting for a parent. Params: p_id."""
    return (
        select(job_deps.c.child_id)
        .where(job_deps.c.parent_id == bindparam("p_id"), job_deps.c.done == const(0))
        .order_by(job_deps.c.child_id)
    )


def close_edges() -> Update:
    """A parent's end applied to its children. Params: p_id."""
    return (
        update(job_deps)
        .where(job_deps.c.parent_id == bindparam("p_id"), job_deps.c.done == const(0))
        .values(done=const(1))
    )


def set_pending() -> Update:
    """A child still waiting, with one parent fewer. Params: j_id, pending."""
    return update(jobs).where(jobs.c.id == bindparam("j_id")).values(pending_parents=bindparam("pending"))


def unblock(now: ColumnElement[float]) -> Update:
    """Operation.UNBLOCK of one child. Params: j_id, pending."""
    return guarded_update(
        Operation.UNBLOCK,
        now,
        where=[jobs.c.id == bindparam("j_id")],
        values={"pending_parents": bindparam("pending")},
    ).returning(*jobs.c)


def cancel_child(now: ColumnElement[float]) -> Update:
    """Operation.CANCEL of a child by its parent's end. Params: j_id, pending, reason (JSON)."""
    return guarded_update(
        Operation.CANCEL,
        now,
        where=[jobs.c.id == bindparam("j_id")],
        values={
            "pending_parents": bindparam("pending"),
            "error": bindparam("reason", type_=jobs.c.error.type),
        },
    ).returning(*jobs.c)


def complete_parent(now: ColumnElement[float]) -> Update:
    """Ack of a job with children (the fast acks skip those). Params: j_id, token, new_result."""
    return guarded_update(
        Operation.COMPLETE,
        now,
        where=[jobs.c.id == bindparam("j_id"), jobs.c.lease_token == bindparam("token")],
        values={"result": bindparam("new_result", type_=jobs.c.result.type)},
    ).returning(*jobs.c)


def parents_of() -> Select:
    """A child's parents. Params: j_id."""
    edge = select(job_deps.c.parent_id).where(job_deps.c.child_id == bindparam("j_id"))
    return select(jobs).where(jobs.c.id.in_(edge.scalar_subquery())).order_by(jobs.c.id)


def children_of() -> Select:
    """A parent's children. Params: j_id, limit."""
    edge = select(job_deps.c.child_id).where(job_deps.c.parent_id == bindparam("j_id"))
    return (
        select(jobs)
        .where(jobs.c.id.in_(edge.scalar_subquery()))
        .order_by(jobs.c.id)
        .limit(bindparam("limit"))
    )


def waiting_child_of(parent: Any) -> Any:
    """EXISTS a child of ``parent`` (a jobs id column) that still waits."""
    child = jobs.alias("child")
    return exists(
        select(1)
        .select_from(job_deps.join(child, child.c.id == job_deps.c.child_id))
        .where(
            job_deps.c.parent_id == parent,
            child.c.status == const(int(JobStatus.Scheduled)),
            child.c.pending_parents > const(0),
        )
    )


def insert_batch() -> Insert:
    """A batch row. Params: id, kind, size, callback_job_id, created_at."""
    return insert(batches)


def batch_by_id() -> Select:
    """Params: b_id."""
    return select(batches).where(batches.c.id == bindparam("b_id"))


def batch_counts() -> Select:
    """A batch's jobs by status. Params: b_id."""
    return (
        select(jobs.c.status, func.count())
        .where(jobs.c.batch_id == bindparam("b_id"))
        .group_by(jobs.c.status)
    )


def batch_jobs() -> Select:
    """A batch's jobs in enqueue order (ids are UUIDv7). Params: b_id, limit."""
    return (
        select(jobs).where(jobs.c.batch_id == bindparam("b_id")).order_by(jobs.c.id).limit(bindparam("limit"))
    )


def batch_job_ids() -> Select:
    """A batch's first ``limit`` job ids in enqueue order. Params: b_id, limit."""
    return (
        select(jobs.c.id)
        .where(jobs.c.batch_id == bindparam("b_id"))
        .order_by(jobs.c.id)
        .limit(bindparam("limit"))
    )


def batch_open_ids() -> Select:
    """Up to ``limit`` of a batch's unfinished jobs' ids. Params: b_id, limit."""
    return (
        select(jobs.c.id)
        .where(
            jobs.c.batch_id == bindparam("b_id"),
            jobs.c.status.in_(
                [const(int(s)) for s in (JobStatus.Queued, JobStatus.Scheduled, JobStatus.InProgress)]
            ),
        )
        .limit(bindparam("limit"))
    )


def mark_batch_canceled(now: ColumnElement[float]) -> Update:
    """Params: b_id, actor."""
    return (
        update(batches)
        .where(batches.c.id == bindparam("b_id"))
        .values(canceled_at=now, canceled_by=bindparam("actor"))
    )


def notify() -> Select:
    """Wake idle PostgreSQL workers of a queue whose job became due. Params: channel, queue."""
    return select(func.pg_notify(bindparam("channel", type_=Text()), bindparam("queue", type_=Text())))
