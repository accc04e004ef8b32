"""The bookkeeping of job changes, written once in SQL for SQLite and
PostgreSQL alike: the job events, the counters (``store/counters.py`` keys)
and the history buckets that a batch of changes adds.

A *change* is one row of CHANGE_COLUMNS: a job (or ``''`` for an audit-only
event) of a queue moving ``from_status -> to_status`` (either NULL when it
has none: a new job, a removed one, a refusal) with an event ``kind``
(NULL: no event), appended as a job event when ``logged`` is 1, and counted
per queue when ``counted`` is 1 (``counted``); ``weight`` is how many
identical changes the row stands for (the counters and buckets add it; a
change's own RETURNING row is 1). Each builder
below takes the changes as a CTE with those columns (read once, however
many of its parts use them) and returns one INSERT (an upsert for the counters and buckets):

* PostgreSQL's hot path selects them from the change itself (the UPDATE or
  INSERT ... RETURNING as a CTE, ``pg_statements.with_bookkeeping``): the
  change and its bookkeeping are one autocommit statement;
* every other change, on both engines, sends them as one JSON array bound
  to ``changes`` (``Dialect.changes_from``: SQLite ``json_each``, PostgreSQL
  ``jsonb_to_recordset``) and runs the three statements in its transaction
  (``SqlPlumbing.book``): the counters and buckets over the changes grouped
  by COUNT_COLUMNS (one row a combination, with its weight), the events over
  every logged change (SQLite binds each as one row, ``Dialect.event_source``,
  run as one executemany: no JSON to parse for the rows that differ).

What the rows add, in one place: the event; ``s:<from>:<queue>`` -1 and
``s:<to>:<queue>`` +1 (a change without a queue moves no status count); for
a kind of HISTORY_KINDS with a queue, ``q:<kind>:<queue>`` +1 and +1 in the
current bucket of the narrowest width of HISTORY_WIDTHS, else ``e:<kind>``
+1. No write that another implies: a kind's total is the sum of its queues'
(``counters.derived_event_totals`` reads it so), not a counter of its own,
and a wider width's bucket is the sum of its narrow buckets (rolled up by
trim_history, store/sql/operating.py), not a bucket written beside them. Counter rows
are added in key order (a fixed lock order: concurrent writers never
deadlock), to this process's ``shard`` (bind parameter).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    CTE,
    BigInteger,
    ColumnElement,
    Insert,
    SmallInteger,
    String,
    bindparam,
    cast,
    func,
    insert,
    null,
    select,
    text,
    true,
    union_all,
)

from store.counters import EVENT_PREFIX, HISTORY_KINDS, NARROW, QUEUE_EVENT_PREFIX, STATUS_PREFIX
from store.lifecycle import EventKind
from store.sql.changes import const
from store.sql.schema import counters, history, job_events
from store.sql.statements import bucket_start

#: The columns of a change (the JSON objects ``SqlPlumbing.book`` sends carry these keys).
CHANGE_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("job_id", String()),
    ("queue", String()),
    ("kind", String()),
    ("from_status", SmallInteger()),
    ("to_status", SmallInteger()),
    ("actor", String()),
    ("token", BigInteger()),
    ("message", String()),
    ("logged", SmallInteger()),
    ("counted", SmallInteger()),
    ("weight", BigInteger()),
)
#: The columns the counters and buckets read: ``SqlPlumbing.book`` sends them
#: one row per distinct combination, its ``weight`` the number of changes.
COUNT_COLUMNS: tuple[str, ...] = ("queue", "kind", "from_status", "to_status", "counted")


#: History kinds as their wire values.
_HISTORY_VALUES = frozenset(k.value for k in HISTORY_KINDS)


def _shard() -> Any:
    return bindparam("shard", type_=SmallInteger())


def counted(kind: EventKind | str | None, queue: object) -> int:
    """A change's ``counted``: 1 when its kind is one of HISTORY_KINDS and it
    names its queue (counted per queue and in the buckets), else 0."""
    return 1 if queue is not None and kind in _HISTORY_VALUES else 0


def record_events(src: CTE, now: ColumnElement[float]) -> Insert:
    """Append the logged changes' job events, stamped ``now``."""
    return insert(job_events).from_select(
        ["job_id", "at", "kind", "from_status", "to_status", "actor", "token", "message"],
        select(
            src.c.job_id,
            now,
            src.c.kind,
            src.c.from_status,
            src.c.to_status,
            src.c.actor,
            src.c.token,
            src.c.message,
        ).where(src.c.logged == const(1)),
    )


def _text(*parts: ColumnElement[Any] | str) -> ColumnElement[str]:
    """``a || b || ...`` (SQLite before 3.44 has no concat(); both engines
    turn a number into text there): constants as literals; NULL if any part
    is NULL."""
    out = [const(p, String()) if isinstance(p, str) else p for p in parts]
    text = out[0]
    for part in out[1:]:
        text = text.op("||", return_type=String())(part)
    return text


def status_key_sql(status: ColumnElement[Any], queue: ColumnElement[str]) -> ColumnElement[str]:
    """SQL twin of ``store.counters.status_key``: ``'s:' || status || ':' || queue``."""
    return _text(STATUS_PREFIX, status, ":", queue)


def add_to_counters(upsert: Insert, src: CTE, kind: EventKind | None = None, new: bool = False) -> Insert:
    """Add the changes' deltas to the counters; ``upsert`` is the dialect's
    INSERT of ``counters`` (``Dialect.upsert``). Keys whose deltas cancel out
    (a change from a status to itself) are not written. ``kind``: every
    change is of that kind and names its queue (``changes_select``), and
    ``new``: none has a status to leave (enqueue), so the parts that cannot
    match are left out of the statement."""
    queued = src.c.queue.is_not(None)
    arms = [
        select(status_key_sql(src.c.to_status, src.c.queue).label("key"), src.c.weight.label("d")).where(
            src.c.to_status.is_not(None), queued
        )
    ]
    if not new:
        arms.append(
            select(status_key_sql(src.c.from_status, src.c.queue), -src.c.weight).where(
                src.c.from_status.is_not(None), queued
            )
        )
    if kind is None or not counted(kind, ""):
        arms.append(
            select(_text(EVENT_PREFIX, src.c.kind), src.c.weight).where(
                src.c.kind.is_not(None), src.c.counted == const(0)
            )
        )
    if kind is None or counted(kind, ""):
        by_queue = _text(QUEUE_EVENT_PREFIX, src.c.kind, ":", src.c.queue)
        arms.append(select(by_queue, src.c.weight).where(src.c.counted == const(1)))
    deltas = union_all(*arms).subquery("deltas")
    total = func.sum(deltas.c.d)
    totals = (
        select(deltas.c.key, _shard(), total)
        .where(true())  # SQLite: an upsert's SELECT needs a WHERE (its parser's ambiguity with ON)
        .group_by(deltas.c.key)
        .having(total != const(0))
        .order_by(deltas.c.key)
    )
    bump = upsert.from_select(["key", "shard", "n"], totals)
    return bump.on_conflict_do_update(
        index_elements=[counters.c.key, counters.c.shard], set_={"n": counters.c.n + bump.excluded.n}
    )


def add_to_history(upsert: Insert, src: CTE, now: ColumnElement[float]) -> Insert:
    """Add the changes of HISTORY_KINDS that name a queue to the current
    bucket of the narrowest width (``counters.NARROW``) alone; ``upsert`` is
    the dialect's INSERT of ``history``. The wider widths are its roll-ups
    (the rule of store/counters.py, "roll-up"): trim_history rolls them up
    and history() sums the rest at read time (store/sql/operating.py)."""
    bucket = bucket_start(now, const(NARROW, BigInteger()))
    totals = (
        select(const(NARROW, BigInteger()), bucket, src.c.queue, src.c.kind, _shard(), func.sum(src.c.weight))
        .where(src.c.counted == const(1))
        .group_by(text("2, 3, 4"))  # by position: the bucket's expression once in the text
        .order_by(text("3, 4"))
    )
    ins = upsert.from_select(["width", "bucket", "queue", "kind", "shard", "n"], totals)
    key = [history.c.width, history.c.bucket, history.c.queue, history.c.kind, history.c.shard]
    return ins.on_conflict_do_update(index_elements=key, set_={"n": history.c.n + ins.excluded.n})


def changes_select(
    job_id: ColumnElement[Any],
    queue: ColumnElement[Any],
    kind: EventKind,
    from_status: ColumnElement[Any] | None,
    to_status: ColumnElement[Any],
    actor: ColumnElement[Any] | None,
    token: ColumnElement[Any],
    message: ColumnElement[Any] | None,
) -> CTE:
    """Logged changes of one ``kind`` as a CTE of expressions (a change's own
    RETURNING rows, whose queue is never NULL), labelled CHANGE_COLUMNS; None
    is a NULL of the column's type."""
    values = (
        *(job_id, queue, const(kind.value, String()), from_status, to_status, actor, token, message),
        const(1),
        const(counted(kind, ""), SmallInteger()),
        const(1),
    )
    return select(
        *(
            (cast(null(), kind_) if v is None else v).label(name)
            for v, (name, kind_) in zip(values, CHANGE_COLUMNS, strict=True)
        )
    ).cte("chg")
