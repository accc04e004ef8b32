"""The one guarded-update builder of the SQL store: an operation's UPDATE made
from its row of ``lifecycle.OPERATIONS``.

``enqueue_values(now, delay, held)`` is the VALUES of a new job as ENQUEUE's
row gives them. ``guarded_update(op, now, ...)`` is ``UPDATE jobs SET status = <target>,
<stamps> = now, <clears> = NULL, last_updated_at = now, <values> WHERE status
IN (<sources>) AND <where>``: the guard and every bookkeeping field come from
the table, the caller adds only what the operation takes from its arguments
(its ``writes``). Both dialects build every status change through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Update, literal_column, null, update

from store.lifecycle import Operation, rule, source_codes
from store.sql.schema import jobs


def const(value: int | str, type_: Any = None) -> ColumnElement[Any]:
    """One of our own constants (a status code, an event kind, a counter key
    prefix) written into the SQL text rather than sent as a bind parameter:
    every parameter costs client CPU on every execution (SQLAlchemy's
    processing, the driver's adaptation), a constant nothing. Never for
    values that come from outside (those stay bind parameters)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"const takes an int or a str, not {value!r}")
    text = str(value) if isinstance(value, int) else "'" + value.replace("'", "''") + "'"
    return literal_column(text, type_)


def table_values(op: Operation, now: ColumnElement[float]) -> dict[str, Any]:
    """The SET clause the table gives ``op``: its one target status (FAIL has
    none: its decision sets it), stamped fields = ``now``, cleared fields =
    NULL, ``last_updated_at`` = ``now``."""
    row = rule(op)
    values: dict[str, Any] = {field: now for field in row.stamps}
    values.update({field: null() for field in row.clears})
    values["last_updated_at"] = now
    if len(row.targets) == 1:
        values["status"] = const(int(row.target))
    return values


def enqueue_values(
    now: ColumnElement[float], delay: ColumnElement[float], held: ColumnElement[float]
) -> dict[str, Any]:
    """The columns ENQUEUE's row sets on a new job, as SQL expressions: its
    stamps and ``last_updated_at`` = ``now``, its zeroes = 0, its delays =
    ``now + delay``, its held fields = ``now + held`` (``held`` NULL unless the
    job starts Scheduled: ``lifecycle.enqueue_target``). The status and the
    fields of ``writes`` are the caller's (they come from what enqueue takes)."""
    row = rule(Operation.ENQUEUE)
    values: dict[str, Any] = {field: now for field in (*row.stamps, "last_updated_at")}
    values.update({field: const(0) for field in row.zeroes})
    values.update({field: now + delay for field in row.delays})
    values.update({field: now + held for field in row.held})
    return values


def guarded_update(
    op: Operation,
    now: ColumnElement[float],
    *,
    where: Sequence[ColumnElement[bool]] = (),
    values: dict[str, Any] | None = None,
    sources: bool = True,
) -> Update:
    """``op`` as an UPDATE of ``jobs`` guarded by ``status IN sources(op)``
    (``sources=False`` when ``where`` already pins the status, e.g. a claim's
    literal codes) and ``where``; SET from ``table_values`` then ``values``
    (a key in both raises ValueError: the table decides those fields)."""
    base = table_values(op, now)
    extra = values or {}
    clash = set(base) & set(extra)
    if clash:
        raise ValueError(f"{op.value}: the table already sets {sorted(clash)}")
    guard = [jobs.c.status.in_([const(code) for code in source_codes(op)])] if sources else []
    return update(jobs).where(*guard, *where).values(**{**base, **extra})
