"""The SQL of the per-handler minute buckets (store/handler_metrics.py):
adding outcomes in the transaction of the change that decides them, reading
a handler's minutes, pruning them.

The run-time bin is computed in Python (``handler_metrics.run_key``) and
bound, except in PostgreSQL's batch ack, a single autocommit statement, whose
CTE (``from_completed_pg``) computes it with ``run_key_sql``, the SQL twin of
``run_key`` (the contract tests read the percentiles back on every store).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    Delete,
    Insert,
    Select,
    SmallInteger,
    String,
    bindparam,
    delete,
    func,
    literal,
    select,
    true,
)

from store import handler_metrics as hm
from store.sql.schema import handler_minutes as table

#: One outcome to count: (handler name, outcome stamp s, started_at s or None, outcome).
Outcome = tuple[str, float, float | None, str]


def _upsert_excluded(ins: Insert) -> Insert:
    key = [table.c.name, table.c.bucket, table.c.field, table.c.shard]
    return ins.on_conflict_do_update(index_elements=key, set_={"n": table.c.n + ins.excluded.n})  # type: ignore[attr-defined]


def add_rows(upsert: Insert) -> Insert:
    """Add ``n`` to a (name, bucket, field, shard) row, run once per row
    (executemany); ``upsert`` is the dialect's INSERT of the table."""
    return _upsert_excluded(
        upsert.values(
            name=bindparam("name"),
            bucket=bindparam("bucket"),
            field=bindparam("field"),
            shard=bindparam("shard"),
            n=bindparam("n"),
        )
    )


def rows_of(outcomes: Iterable[Outcome], shard: int) -> list[dict[str, Any]]:
    """The parameter rows of ``add_rows`` for ``outcomes``, one per distinct
    (name, minute, field), sorted (a fixed lock order: no deadlock)."""
    counts: Counter[tuple[str, int, str]] = Counter()
    for name, at, started, outcome in outcomes:
        run_s = None if started is None else at - started
        counts[(name, hm.minute_of(at), hm.field_of(outcome, run_s))] += 1
    return [
        {"name": name, "bucket": bucket, "field": field, "shard": shard, "n": n}
        for (name, bucket, field), n in sorted(counts.items())
    ]


def count_outcomes(conn: Connection, upsert: Insert, outcomes: Sequence[Outcome], shard: int) -> None:
    """Add ``outcomes`` to their minute buckets in ``conn``'s transaction."""
    rows = rows_of(outcomes, shard)
    if rows:
        conn.execute(add_rows(upsert), rows)


def run_key_sql(run_ms: ColumnElement[float]) -> ColumnElement[int]:
    """SQL twin of ``handler_metrics.run_key`` (PostgreSQL: ``ln``, ``ceil``,
    ``greatest``, ``least``)."""
    ms = func.greatest(run_ms, hm.MIN_MS)
    key = func.ceil(func.ln(ms) / literal(math.log(hm.GAMMA)))
    return func.least(func.greatest(key, hm.KEY_MIN), hm.KEY_MAX)


def from_completed_pg(upsert: Insert, upd: Any, shard: ColumnElement[int]) -> Insert:
    """PostgreSQL: every job of the changed rows ``upd`` (a CTE returning the
    jobs columns) counted succeeded with its run-time bin
    (``handler_metrics.field_of``), as one upsert to run as a CTE of the
    ack's statement."""
    bucket = (func.floor(upd.c.last_updated_at / hm.MINUTE_S) * hm.MINUTE_S).cast(BigInteger)
    run_ms = (upd.c.last_updated_at - upd.c.started_at) * 1000.0
    key = run_key_sql(func.greatest(run_ms, 0.0)).cast(BigInteger).cast(String)
    code = literal(hm.CODES[hm.SUCCEEDED], String())
    field = code.op("||")(func.coalesce(key, literal("", String())))
    fields = select(upd.c.name.label("name"), bucket.label("bucket"), field.label("field")).subquery(
        "hm_fields"
    )
    totals = (
        select(fields.c.name, fields.c.bucket, fields.c.field, shard.cast(SmallInteger), func.count())
        .where(true())
        .group_by(fields.c.name, fields.c.bucket, fields.c.field)
        .order_by(fields.c.name, fields.c.bucket, fields.c.field)
    )
    return _upsert_excluded(upsert.from_select(["name", "bucket", "field", "shard", "n"], totals))


def minutes_since() -> Select:
    """A handler's minute buckets from ``since`` on, shards summed: (bucket,
    field, n). Params: name, since."""
    return (
        select(table.c.bucket, table.c.field, func.sum(table.c.n).label("n"))
        .where(table.c.name == bindparam("name"), table.c.bucket >= bindparam("since", type_=BigInteger()))
        .group_by(table.c.bucket, table.c.field)
    )


def trim() -> Delete:
    """Drop minute buckets that started before ``before`` (epoch s)."""
    return delete(table).where(table.c.bucket < bindparam("before", type_=BigInteger()))
