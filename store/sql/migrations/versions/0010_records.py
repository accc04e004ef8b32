"""Records: the tables of the worker registry, locks, run histories,
schedules, failure windows and bulk operations become rows of one table,
``leasehold_records`` (the record port, store/ports.py). Every row moves
(upgrade and downgrade alike): nothing is lost either way.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

Json = sa.JSON(none_as_null=True).with_variant(sa.dialects.postgresql.JSONB(none_as_null=True), "postgresql")
RECORDS = "leasehold_records"
#: Unfinished bulk operations (store/bookings.py ``operation.open``).
OPEN_STATES = ("queued", "running")

records = sa.table(
    RECORDS,
    sa.column("kind", sa.String),
    sa.column("key", sa.String),
    sa.column("score", sa.Double),
    sa.column("expires_at", sa.Double),
    sa.column("value", Json),
)

#: The retired tables as revision 0009 made them, with their indexes.
OLD_TABLES: dict[str, tuple[list[Callable[[], sa.Column[Any]]], list[tuple[str, list[str]]]]] = {
    "leasehold_workers": (
        [
            lambda: sa.Column("id", sa.String(200), primary_key=True),
            lambda: sa.Column("host", sa.String(255), nullable=False),
            lambda: sa.Column("pid", sa.Integer(), nullable=False),
            lambda: sa.Column("queues", Json, nullable=False),
            lambda: sa.Column("concurrency", sa.Integer(), nullable=False),
            lambda: sa.Column("jobs_in_hand", Json, nullable=False),
            lambda: sa.Column("started_at", sa.Double(), nullable=False),
            lambda: sa.Column("last_seen_at", sa.Double(), nullable=False),
            lambda: sa.Column("command", sa.String(20)),
            lambda: sa.Column("command_by", sa.String(200)),
            lambda: sa.Column("handlers", Json),
        ],
        [],
    ),
    "leasehold_locks": (
        [
            lambda: sa.Column("name", sa.String(100), primary_key=True),
            lambda: sa.Column("owner", sa.String(200), nullable=False),
            lambda: sa.Column("expires_at", sa.Double(), nullable=False),
        ],
        [],
    ),
    "leasehold_recovery_runs": (
        [
            lambda: sa.Column("id", sa.String(36), primary_key=True),
            lambda: sa.Column("started_at", sa.Double(), nullable=False),
            lambda: sa.Column("finished_at", sa.Double(), nullable=False),
            lambda: sa.Column("owner", sa.String(200), nullable=False),
            lambda: sa.Column("trigger", sa.String(200), nullable=False),
            lambda: sa.Column("recovered", sa.Integer(), nullable=False),
            lambda: sa.Column("failed", sa.Integer(), nullable=False),
            lambda: sa.Column("duration_ms", sa.Double(), nullable=False),
        ],
        [("leasehold_ix_recovery_runs_started", ["started_at"])],
    ),
    "leasehold_maintenance_runs": (
        [
            lambda: sa.Column("id", sa.String(36), primary_key=True),
            lambda: sa.Column("task", sa.String(40), nullable=False),
            lambda: sa.Column("started_at", sa.Double(), nullable=False),
            lambda: sa.Column("finished_at", sa.Double(), nullable=False),
            lambda: sa.Column("owner", sa.String(200), nullable=False),
            lambda: sa.Column("count", sa.Integer(), nullable=False),
            lambda: sa.Column("duration_ms", sa.Double(), nullable=False),
            lambda: sa.Column("longest_batch_ms", sa.Double(), nullable=False),
        ],
        [("leasehold_ix_maintenance_runs_task", ["task", "started_at"])],
    ),
    "leasehold_schedules": (
        [
            lambda: sa.Column("name", sa.String(200), primary_key=True),
            lambda: sa.Column("handler", sa.String(200), nullable=False),
            lambda: sa.Column("cron", sa.String(200), nullable=False),
            lambda: sa.Column("timezone", sa.String(64), nullable=False),
            lambda: sa.Column("queue", sa.String(100), nullable=False),
            lambda: sa.Column("payload", Json),
            lambda: sa.Column("catch_up", sa.SmallInteger(), nullable=False, server_default=sa.text("1")),
            lambda: sa.Column("enabled", sa.SmallInteger(), nullable=False, server_default=sa.text("1")),
            lambda: sa.Column("last_tick_at", sa.Double()),
            lambda: sa.Column("last_job_id", sa.String(36)),
            lambda: sa.Column("updated_at", sa.Double(), nullable=False),
        ],
        [],
    ),
    "leasehold_failures": (
        [
            lambda: sa.Column("key", sa.String(64), primary_key=True),
            lambda: sa.Column("n", sa.Integer(), nullable=False),
            lambda: sa.Column("window_end", sa.Double(), nullable=False),
        ],
        [("leasehold_ix_failures_window_end", ["window_end"])],
    ),
    "leasehold_operations": (
        [
            lambda: sa.Column("id", sa.String(100), primary_key=True),
            lambda: sa.Column("state", sa.String(10), nullable=False),
            lambda: sa.Column("created_at", sa.Double(), nullable=False),
            lambda: sa.Column("updated_at", sa.Double(), nullable=False),
            lambda: sa.Column("body", Json, nullable=False),
        ],
        [("leasehold_ix_operations_created", ["created_at"])],
    ),
}


def _table(name: str) -> sa.Table:
    columns, _ = OLD_TABLES[name]
    return sa.Table(name, sa.MetaData(), *(make() for make in columns))


def _rows(table: sa.Table | sa.TableClause) -> Iterator[dict[str, Any]]:
    for row in op.get_bind().execute(sa.select(table)).mappings():
        yield {str(k): v for k, v in row.items()}  # plain str keys: orjson refuses quoted_name


def _record(kind: str, key: str, value: dict[str, Any], score: Any = None, expires_at: Any = None) -> dict:
    return {"kind": kind, "key": key, "value": value, "score": score, "expires_at": expires_at}


def _to_records(name: str, row: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of one row of a retired table (store/registry.py, store/bookings.py)."""
    if name == "leasehold_workers":
        value = {k: v for k, v in row.items() if not (k in ("command", "command_by") and v is None)}
        value["handlers"] = list(row["handlers"] or [])
        return [_record("worker", row["id"], value, row["last_seen_at"])]
    if name == "leasehold_locks":
        value = {"holder": row["owner"], "expires_at": row["expires_at"], "token": 1}
        return [_record("hold", row["name"], value)]
    if name == "leasehold_recovery_runs":
        return [_record("recovery_run", row["id"], row, row["started_at"])]
    if name == "leasehold_maintenance_runs":
        return [_record(f"maintenance_run.{row['task']}", row["id"], row, row["started_at"])]
    if name == "leasehold_schedules":
        value = {**row, "catch_up": bool(row["catch_up"]), "enabled": bool(row["enabled"])}
        value["created_at"] = row["updated_at"]
        return [_record("schedule", row["name"], value, row["updated_at"])]
    if name == "leasehold_failures":
        return [_record("failure", row["key"], {"n": row["n"]}, None, row["window_end"])]
    # leasehold_operations
    value = {**row["body"], "state": row["state"], "created_at": row["created_at"]}
    value["updated_at"] = row["updated_at"]
    found = [_record("operation", row["id"], value, row["created_at"])]
    if row["state"] in OPEN_STATES:
        found.append(
            _record("operation.open", row["id"], {"created_at": row["created_at"]}, row["created_at"])
        )
    return found


def _from_record(row: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The retired table and its row for one record; None for records it
    did not keep (an unheld hold, the unfinished operations' index)."""
    kind, key, v = row["kind"], row["key"], row["value"]
    if kind == "worker":
        columns = [c().name for c in OLD_TABLES["leasehold_workers"][0]]
        return "leasehold_workers", {c: v.get(c) for c in columns}
    if kind == "hold":
        if v.get("holder") is None:
            return None
        return "leasehold_locks", {"name": key, "owner": v["holder"], "expires_at": v["expires_at"]}
    if kind == "recovery_run":
        return "leasehold_recovery_runs", v
    if kind.startswith("maintenance_run."):
        return "leasehold_maintenance_runs", v
    if kind == "schedule":
        columns = [c().name for c in OLD_TABLES["leasehold_schedules"][0]]
        found = {c: v.get(c) for c in columns}
        return "leasehold_schedules", {**found, "catch_up": int(v["catch_up"]), "enabled": int(v["enabled"])}
    if kind == "failure":
        return "leasehold_failures", {"key": key, "n": v["n"], "window_end": row["expires_at"]}
    if kind == "operation":
        state, created, updated = v["state"], v["created_at"], v["updated_at"]
        body = {k: x for k, x in v.items()}
        return "leasehold_operations", {
            "id": key,
            "state": state,
            "created_at": created,
            "updated_at": updated,
            "body": body,
        }
    return None


def upgrade() -> None:
    op.create_table(
        RECORDS,
        sa.Column("kind", sa.String(80), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("score", sa.Double()),
        sa.Column("expires_at", sa.Double()),
        sa.Column("value", Json, nullable=False),
        sa.PrimaryKeyConstraint("kind", "key", name="leasehold_pk_records"),
    )
    op.create_index("leasehold_ix_records_score", RECORDS, ["kind", "score"])
    op.create_index(
        "leasehold_ix_records_expires",
        RECORDS,
        ["kind", "expires_at"],
        postgresql_where=sa.text("expires_at IS NOT NULL"),
        sqlite_where=sa.text("expires_at IS NOT NULL"),
    )
    for name, (_, indexes) in OLD_TABLES.items():
        moved = [r for row in _rows(_table(name)) for r in _to_records(name, row)]
        if moved:
            op.bulk_insert(records, moved)
        for index, _ in indexes:
            op.drop_index(index, name)
        op.drop_table(name)


def downgrade() -> None:
    for name, (columns, indexes) in OLD_TABLES.items():
        op.create_table(name, *(make() for make in columns))
        for index, on in indexes:
            op.create_index(index, name, on)
    back: dict[str, list[dict[str, Any]]] = {}
    for row in _rows(records):
        found = _from_record(row)
        if found is not None:
            back.setdefault(found[0], []).append(found[1])
    for name, rows in back.items():
        op.bulk_insert(_table(name), rows)
    op.drop_index("leasehold_ix_records_expires", RECORDS)
    op.drop_index("leasehold_ix_records_score", RECORDS)
    op.drop_table(RECORDS)
