"""Named statements of the SQL store's record port (``leasehold_records``,
store/ports.py), one function each. Params are named after the columns
(``kind``, ``key``, ``score``, ``expires_at``, ``value``) unless said.
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
    select,
    update,
)

from store.sql.schema import records

r = records.c


def _alive(now: ColumnElement[float]) -> ColumnElement[bool]:
    return r.expires_at.is_(None) | (r.expires_at > now)


def record_for_change(now: ColumnElement[float]) -> Select:
    """One record, expired or not, with the store's clock, row-locked on
    PostgreSQL (SQLite's ``BEGIN IMMEDIATE`` already serialises writers).
    Params: kind, key. Returns value, score, expires_at, now."""
    stmt = select(r.value, r.score, r.expires_at, now.label("now"))
    return stmt.where(r.kind == bindparam("kind"), r.key == bindparam("key")).with_for_update()


def insert_record(ins: Insert) -> Insert:
    """Insert a record unless one of its kind and key exists (a concurrent
    insert won: the caller reads it again); ``ins`` is the dialect's INSERT
    of ``records``. Params: every column."""
    return ins.on_conflict_do_nothing(index_elements=[r.kind, r.key])


def update_record() -> Update:
    """Replace a record's value, score and expiry. Params: every column,
    each named ``u_<column>`` (SQLAlchemy reserves the column names in an UPDATE)."""
    return (
        update(records)
        .where(r.kind == bindparam("u_kind"), r.key == bindparam("u_key"))
        .values(value=bindparam("u_value"), score=bindparam("u_score"), expires_at=bindparam("u_expires_at"))
    )


def trim_kind() -> Delete:
    """Keep the ``keep`` records of ``kind`` with the highest score (ties by key).
    Params: kind, keep."""
    kept = (
        select(r.key)
        .where(r.kind == bindparam("kind"), r.score.is_not(None))
        .order_by(r.score.desc(), r.key)
        .limit(bindparam("keep"))
    )
    return delete(records).where(
        r.kind == bindparam("kind"), r.score.is_not(None), r.key.not_in(kept.scalar_subquery())
    )


def get_record(now: ColumnElement[float]) -> Select:
    """One unexpired record. Params: kind, key. Returns value, score,
    expires_in, now (the store's clock)."""
    stmt = select(r.value, r.score, (r.expires_at - now).label("expires_in"), now.label("now"))
    return stmt.where(r.kind == bindparam("kind"), r.key == bindparam("key"), _alive(now))


def page_records(now: ColumnElement[float], oldest_first: bool) -> Select:
    """Unexpired scored records of a kind by score (ties by key). Params: kind,
    limit. Returns key, value, score, expires_in."""
    order = r.score if oldest_first else r.score.desc()
    stmt = select(r.key, r.value, r.score, (r.expires_at - now).label("expires_in"))
    stmt = stmt.where(r.kind == bindparam("kind"), r.score.is_not(None), _alive(now))
    return stmt.order_by(order, r.key).limit(bindparam("limit"))


def drop_record() -> Delete:
    """Delete one record. Params: kind, key."""
    return delete(records).where(r.kind == bindparam("kind"), r.key == bindparam("key"))


def prune_records(now: ColumnElement[float], expired: bool) -> Delete:
    """Delete up to ``limit`` records of ``kind``, lowest first: scored below
    now - ``age`` or, with ``expired``, past their expiry. Params: kind, limit,
    and ``age`` (seconds) unless ``expired``. Returns their keys."""
    if expired:
        gone = r.expires_at <= now
        first = select(r.key).where(r.kind == bindparam("kind"), gone).order_by(r.expires_at)
    else:
        gone = r.score < now - bindparam("age", type_=Double())
        first = select(r.key).where(r.kind == bindparam("kind"), gone).order_by(r.score)
    keys = first.limit(bindparam("limit")).scalar_subquery()
    return delete(records).where(r.kind == bindparam("kind"), r.key.in_(keys), gone).returning(r.key)
