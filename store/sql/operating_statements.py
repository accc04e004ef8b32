"""Named statements of what the SQL store keeps beside the jobs and of taking
jobs out: purge and delete, unique keys, failed attempts, progress and the
history counters. Same conventions as ``statements.py`` (``now`` is the
store's clock; bind parameters named in each docstring).
"""

from __future__ import annotations

from sqlalchemy import (
    ColumnElement,
    Delete,
    Double,
    Insert,
    Select,
    Update,
    bindparam,
    delete,
    func,
    insert,
    select,
    update,
)

from store.sql.changes import const
from store.sql.flow_statements import waiting_child_of
from store.sql.schema import Json, attempts, history, job_events, jobs, queues, unique_keys
from store.sql.statements import IN_PROGRESS, OPERATOR_PREFIX, json_with_at


def _purgeable(now: ColumnElement[float]) -> list[ColumnElement[bool]]:
    age = bindparam("age", type_=Double())
    # A parent whose children still wait is kept: they read its result.
    waiting = waiting_child_of(jobs.c.id)
    return [
        jobs.c.status.in_(bindparam("statuses", expanding=True)),
        jobs.c.last_updated_at < now - age,
        (jobs.c.has_children == const(0)) | ~waiting,
    ]


def purge_candidates(now: ColumnElement[float]) -> Select:
    """Finished jobs of some statuses last updated before ``now - age``
    (ix_jobs_status_updated), locked for the purge; rows another purge holds
    are skipped (PostgreSQL). Params: statuses (expanding), age, limit."""
    return (
        select(jobs.c.id, jobs.c.status, jobs.c.queue)
        .where(*_purgeable(now))
        .order_by(jobs.c.status, jobs.c.last_updated_at)
        .limit(bindparam("limit"))
        .with_for_update(skip_locked=True)
    )


def count_purgeable(now: ColumnElement[float]) -> Select:
    """How many jobs purge_candidates would find with no limit. Params: statuses, age."""
    return select(func.count()).select_from(jobs).where(*_purgeable(now))


def delete_unique_keys_of() -> Delete:
    """Release the unique keys jobs hold. Params: ids (expanding)."""
    return delete(unique_keys).where(unique_keys.c.job_id.in_(bindparam("ids", expanding=True)))


def unique_holder() -> Select:
    """The job holding a unique key (locked on PostgreSQL), with its status
    and the key's expiry. Params: key. Returns key row + ``status`` (NULL
    when the job is gone)."""
    return (
        select(unique_keys.c.job_id, unique_keys.c.expires_at, jobs.c.status)
        .select_from(unique_keys.outerjoin(jobs, jobs.c.id == unique_keys.c.job_id))
        .where(unique_keys.c.key == bindparam("key"))
        .with_for_update(of=unique_keys)
    )


def insert_unique_key(now: ColumnElement[float]) -> Insert:
    """A new unique key for a new job, until ``now + unique_for``. A plain
    INSERT: two enqueues racing for a free key collide on its primary key
    (IntegrityError), and the loser retries and finds the winner's job.
    Params: u_key, u_job, unique_for."""
    until = now + bindparam("unique_for", type_=Double())
    return insert(unique_keys).values(key=bindparam("u_key"), job_id=bindparam("u_job"), expires_at=until)


def move_unique_key(now: ColumnElement[float]) -> Update:
    """Hand a released key (its job finished and its time passed) to a new
    job; the row is locked by ``unique_holder``. Params: u_key, u_job, unique_for."""
    until = now + bindparam("unique_for", type_=Double())
    return (
        update(unique_keys)
        .where(unique_keys.c.key == bindparam("u_key"))
        .values(job_id=bindparam("u_job"), expires_at=until)
    )


def delete_jobs() -> Delete:
    """Delete jobs by id. Params: ids (expanding). Returns the deleted
    (id, status, queue): what the counters lose."""
    return (
        delete(jobs)
        .where(jobs.c.id.in_(bindparam("ids", expanding=True)))
        .returning(jobs.c.id, jobs.c.status, jobs.c.queue)
    )


def delete_events_of() -> Delete:
    """Delete the events of jobs, except operator actions: the audit log
    outlives the jobs it names. Params: ids (expanding)."""
    return delete(job_events).where(
        job_events.c.job_id.in_(bindparam("ids", expanding=True)),
        job_events.c.actor.is_(None) | job_events.c.actor.not_like(f"{OPERATOR_PREFIX}%"),
    )


def insert_attempt(now: ColumnElement[float]) -> Insert:
    """Record a failed attempt, finished now. Params: job_id, attempt,
    token, worker_id, error, started_at."""
    return insert(attempts).values(finished_at=now)


def attempts_of() -> Select:
    """A job's failed attempts, oldest first. Params: job_id."""
    return select(attempts).where(attempts.c.job_id == bindparam("job_id")).order_by(attempts.c.id)


def delete_attempts_of() -> Delete:
    """Delete the attempts of jobs. Params: ids (expanding)."""
    return delete(attempts).where(attempts.c.job_id.in_(bindparam("ids", expanding=True)))


def set_progress(now: ColumnElement[float]) -> Update:
    """A running job's progress, fenced by its token, stamped ``at`` = now in
    the same statement. Params: j_id, token, p_value (JSON object without
    ``at``). Returns the id when written."""
    return (
        update(jobs)
        .where(
            jobs.c.id == bindparam("j_id"),
            jobs.c.lease_token == bindparam("token"),
            jobs.c.status == IN_PROGRESS,
        )
        .values(progress=json_with_at(bindparam("p_value", type_=Json), now))
        .returning(jobs.c.id)
    )


def history_since(with_queue: bool) -> Select:
    """History counters of one width from a bucket on, summed over shards
    (and queues unless ``with_queue``). Params: h_width, since[, h_queue]."""
    where = [history.c.width == bindparam("h_width"), history.c.bucket >= bindparam("since", type_=Double())]
    if with_queue:
        where.append(history.c.queue == bindparam("h_queue"))
    return (
        select(history.c.bucket, history.c.kind, func.sum(history.c.n))
        .where(*where)
        .group_by(history.c.bucket, history.c.kind)
        .order_by(history.c.bucket)
    )


def trim_history(now: ColumnElement[float]) -> Delete:
    """Drop buckets of one width older than its retention. Params: h_width, keep."""
    return delete(history).where(
        history.c.width == bindparam("h_width"),
        history.c.bucket < now - bindparam("keep", type_=Double()),
    )


def audit_page() -> Select:
    """Operator actions (the audit log), newest first, before the event id
    ``before`` (ix_job_events_audit). Params: before (an id; 2**62 for the
    first page), limit."""
    return (
        select(job_events)
        .where(job_events.c.actor.like(f"{OPERATOR_PREFIX}%"), job_events.c.id < bindparam("before"))
        .order_by(job_events.c.id.desc())
        .limit(bindparam("limit"))
    )


def prune_audit(now: ColumnElement[float]) -> Delete:
    """Delete the operator actions older than ``now - age`` among the
    ``limit`` oldest (ix_job_events_audit walks them by id, the order they
    were written in): a batch reads ``limit`` entries however long the log.
    Params: age, limit."""
    oldest = (
        select(job_events.c.id, job_events.c.at)
        .where(job_events.c.actor.like(f"{OPERATOR_PREFIX}%"))
        .order_by(job_events.c.id)
        .limit(bindparam("limit"))
        .subquery()
    )
    age = bindparam("age", type_=Double())
    return delete(job_events).where(job_events.c.id.in_(select(oldest.c.id).where(oldest.c.at < now - age)))


def set_queue_paused(ins: Insert, now: ColumnElement[float]) -> Insert:
    """Pause or resume a queue (upsert); ``ins`` is the dialect's INSERT of
    ``queues``. Params: name, paused (0/1), actor. Returns the row."""
    ins = ins.values(
        name=bindparam("name"), paused=bindparam("paused"), changed_by=bindparam("actor"), changed_at=now
    )
    return ins.on_conflict_do_update(
        index_elements=[queues.c.name],
        set_={"paused": ins.excluded.paused, "changed_by": ins.excluded.changed_by, "changed_at": now},
    ).returning(*queues.c)


def all_queue_states() -> Select:
    """Queues ever paused or resumed, by name. No params."""
    return select(queues).order_by(queues.c.name)
