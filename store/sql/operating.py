"""What the SQL store needs to be operated for months (a mixin of
``SqlStore``): removing jobs (purge, delete), paused queues and the history
buckets. Records (workers, runs, schedules) are kept through the record port
(``records.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from store.counters import HISTORY_WIDTHS
from store.errors import ValidationError
from store.lifecycle import EventKind
from store.models import QueueState, ts
from store.sql import operating_statements as ops
from store.sql.plumbing import SqlPlumbing, event_row
from store.sql.schema import queues


class SqlOperatingMixin(SqlPlumbing):
    """Retention, paused queues, history."""

    # ------------------------------------------------------------- removal
    def remove_jobs(self, conn: Connection, rows: Sequence[tuple[str, int, str]]) -> int:
        """Delete jobs ``(id, status code, queue)`` in ``conn``: their own
        events (operator actions stay in the audit log), unique keys (the
        idempotency key is a column and goes with the row), counters: by the
        rows the DELETE removed, so two removals of one job count it once.
        Returns how many jobs were deleted."""
        ids = [r[0] for r in rows]
        conn.execute(ops.delete_events_of(), {"ids": ids})
        conn.execute(ops.delete_unique_keys_of(), {"ids": ids})
        conn.execute(ops.delete_attempts_of(), {"ids": ids})
        deleted = conn.execute(ops.delete_jobs(), {"ids": ids}).all()
        self.book(
            conn,
            [
                event_row(job_id, None, status, None, None, None, queue=queue)
                for job_id, status, queue in deleted
            ],
        )
        return len(deleted)

    def _purge(self, older_than_s: float, limit: int | None, statuses: tuple[int, ...]) -> int:
        if limit is None:  # count_purgeable
            stmt, params = ops.count_purgeable(self._now), {"age": older_than_s, "statuses": list(statuses)}
            return self.tx(lambda c: c.execute(stmt, params).scalar_one(), write=False)

        def body(conn: Connection) -> int:
            params = {"age": older_than_s, "limit": limit, "statuses": list(statuses)}
            rows = conn.execute(ops.purge_candidates(self._now), params).all()
            return self.remove_jobs(conn, [tuple(r) for r in rows]) if rows else 0

        return self.tx(body)

    # -------------------------------------------------------------- queues
    def _set_paused(self, queue: str, paused: bool, actor: str) -> QueueState:
        kind = EventKind.QUEUE_PAUSED if paused else EventKind.QUEUE_RESUMED
        stmt = ops.set_queue_paused(self.dialect.upsert(queues), self._now)

        def body(conn: Connection) -> QueueState:
            row = conn.execute(stmt, {"name": queue, "paused": int(paused), "actor": actor}).mappings().one()
            self.book(conn, [event_row("", kind, None, None, actor, None, f"queue {queue}")])
            return _queue_state(row)

        return self.tx(body)

    def _record_audit(self, kind: EventKind, actor: str, message: str) -> None:
        self.tx(lambda conn: self.book(conn, [event_row("", kind, None, None, actor, None, message)]))

    def queue_states(self) -> list[QueueState]:
        return [_queue_state(r) for r in self.read(ops.all_queue_states())]

    # ------------------------------------------------------------- history
    def history(self, width_s: int, since: float, queue: str | None = None) -> dict[str, dict[float, int]]:
        if width_s not in HISTORY_WIDTHS:
            raise ValidationError("width", f"must be one of {sorted(HISTORY_WIDTHS)}")
        params: dict[str, Any] = {"h_width": width_s, "since": since, "h_queue": queue}
        rows = self.tx(lambda c: c.execute(ops.history_since(queue is not None), params).all(), write=False)
        out: dict[str, dict[float, int]] = {}
        for bucket, kind, n in rows:
            out.setdefault(kind, {})[float(bucket)] = int(n)
        return out

    def trim_history(self) -> int:
        def body(conn: Connection) -> int:
            stmt = ops.trim_history(self._now)
            return sum(
                conn.execute(stmt, {"h_width": w, "keep": keep}).rowcount
                for w, keep in HISTORY_WIDTHS.items()
            )

        return self.tx(body)


def _queue_state(row: object) -> QueueState:
    r = row  # a mapping
    return QueueState(r["name"], bool(r["paused"]), r["changed_by"], ts(r["changed_at"]))  # type: ignore[index]
