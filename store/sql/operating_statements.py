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
    Integer,
    ScalarSelect,
    Select,
    Update,
    bindparam,
    cast,
    delete,
    func,
    insert,
    select,
    text,
    union_all,
    update,
)

from store.sql.changes import const
from store.sql.flow_statements import waiting_child_of
from store.sql.schema import Json, attempts, counters, history, job_events, jobs, queues, unique_keys
from store.sql.statements import IN_PROGRESS, OPERATOR_PREFIX, bucket_start, json_with_at


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
    """History buckets of the narrowest width (written as they are) from a
    bucket on, summed over shards (and queues unless ``with_queue``).
    Params: h_width, since[, h_queue]."""
    where = [history.c.width == bindparam("h_width"), history.c.bucket >= bindparam("since", type_=Double())]
    if with_queue:
        where.append(history.c.queue == bindparam("h_queue"))
    return (
        select(history.c.bucket, history.c.kind, func.sum(history.c.n))
        .where(*where)
        .group_by(history.c.bucket, history.c.kind)
        .order_by(history.c.bucket)
    )


def _mark() -> ScalarSelect[int]:
    """The roll-up mark of the width in h_mark_key (counters.rolled_key), NULL when none."""
    return (
        select(counters.c.n)
        .where(counters.c.key == bindparam("h_mark_key"), counters.c.shard == 0)
        .scalar_subquery()
    )


def wide_history_since(with_queue: bool) -> Select:
    """History buckets of a wider width from a bucket on, by the rule of
    store/counters.py ("roll-up"), in one statement (so a roll-up committed
    meanwhile shows once): its own buckets from ``since`` up to its mark,
    and the narrow buckets from ``h_from`` (``counters.read_from`` without
    the mark) and the mark on, each counted in its wide bucket; summed over
    shards (and queues unless ``with_queue``). Params: h_width, h_narrow,
    h_mark_key, since, h_from[, h_queue]."""
    width, mark = bindparam("h_width", type_=Integer()), _mark()
    start = bindparam("h_from", type_=Double())
    own = [
        history.c.width == width,
        history.c.bucket >= bindparam("since", type_=Double()),
        history.c.bucket < mark,
    ]
    narrow = [
        history.c.width == bindparam("h_narrow", type_=Integer()),
        history.c.bucket >= start,
        history.c.bucket >= func.coalesce(mark, start),
    ]
    if with_queue:
        own.append(history.c.queue == bindparam("h_queue"))
        narrow.append(history.c.queue == bindparam("h_queue"))
    parts = union_all(
        select(history.c.bucket.label("bucket"), history.c.kind, history.c.n).where(*own),
        select(bucket_start(history.c.bucket, width), history.c.kind, history.c.n).where(*narrow),
    ).subquery("parts")
    return (
        select(parts.c.bucket, parts.c.kind, func.sum(parts.c.n))
        .group_by(parts.c.bucket, parts.c.kind)
        .order_by(parts.c.bucket)
    )


def rolled_mark() -> Select:
    """The roll-up mark of one width, locked until the transaction ends
    (PostgreSQL; SQLite's writer already holds the database). Params: h_mark_key."""
    return (
        select(counters.c.n)
        .where(counters.c.key == bindparam("h_mark_key"), counters.c.shard == 0)
        .with_for_update()
    )


def first_mark(upsert: Insert) -> Insert:
    """Set a width's roll-up mark unless it has one; ``upsert`` is the
    dialect's INSERT of ``counters``. Params: h_mark_key, h_mark."""
    return upsert.values(key=bindparam("h_mark_key"), shard=0, n=bindparam("h_mark")).on_conflict_do_nothing()


def move_mark() -> Update:
    """Move a width's roll-up mark. Params: h_mark_key, h_mark."""
    return (
        update(counters)
        .where(counters.c.key == bindparam("h_mark_key"), counters.c.shard == 0)
        .values(n=bindparam("h_mark"))
    )


def oldest_bucket() -> Select:
    """The start of the oldest bucket of one width, NULL when it has none. Params: h_width."""
    return select(func.min(history.c.bucket)).where(history.c.width == bindparam("h_width"))


def roll_up(upsert: Insert) -> Insert:
    """Add the narrow buckets starting in [h_low, h_high) to the wider
    buckets of width h_width that hold them (shard 0), summed by queue and
    kind; ``upsert`` is the dialect's INSERT of ``history``. Reads
    (h_high - h_low) / h_narrow narrow buckets of every queue, kind and
    shard. Params: h_width, h_narrow, h_low, h_high."""
    width = bindparam("h_width", type_=Integer())
    bucket = bucket_start(history.c.bucket, width)
    sums = (
        select(
            cast(width, Integer()), bucket, history.c.queue, history.c.kind, const(0), func.sum(history.c.n)
        )
        .where(
            history.c.width == bindparam("h_narrow", type_=Integer()),
            history.c.bucket >= bindparam("h_low", type_=Double()),
            history.c.bucket < bindparam("h_high", type_=Double()),
        )
        .group_by(text("2, 3, 4"))  # by position: the bucket's expression once in the text
        .order_by(text("2, 3, 4"))
    )
    ins = upsert.from_select(["width", "bucket", "queue", "kind", "shard", "n"], sums)
    key = [history.c.width, history.c.bucket, history.c.queue, history.c.kind, history.c.shard]
    return ins.on_conflict_do_update(index_elements=key, set_={"n": history.c.n + ins.excluded.n})


def trim_history() -> Delete:
    """Drop the buckets of one width that start before h_before. Params: h_width, h_before."""
    return delete(history).where(
        history.c.width == bindparam("h_width"),
        history.c.bucket < bindparam("h_before", type_=Double()),
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
