"""What the SQL store needs to be operated for months (a mixin of
``SqlStore``): removing jobs (purge, delete), paused queues and the history
buckets. Records (workers, runs, schedules) are kept through the record port
(``records.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from store.counters import HISTORY_WIDTHS, NARROW, read_from, roll_span, rolled_key
from store.errors import ValidationError
from store.handler_metrics import RETENTION_S
from store.lifecycle import EventKind
from store.models import QueueState, ts
from store.parts import Part
from store.sql import handler_minutes as hmin
from store.sql import operating_statements as ops
from store.sql.job_logs import delete_logs_of
from store.sql.plumbing import event_row
from store.sql.schema import counters, history, queues

#: Wider history widths, each rolled up from the narrowest (store/counters.py, "roll-up").
WIDER = tuple(w for w in HISTORY_WIDTHS if w != NARROW)
#: Most wide buckets one roll-up transaction takes (a day of hours: 1,440
#: minute buckets of every queue, kind and shard read).
ROLL_BATCH = 24
#: Seconds a wide bucket is left after it ended before it is rolled up; on
#: PostgreSQL also not before the oldest other open transaction started
#: (``Dialect.writes_since``): a statement's clock is its transaction's
#: start, so a change stamped inside the bucket may commit after it ended.
ROLL_GRACE_S = 60.0


class SqlOperatingPart(Part):
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
        conn.execute(delete_logs_of(), {"ids": ids})
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
        """One statement: the narrowest width's buckets as written; a wider
        width's by the rule of store/counters.py ("roll-up"). Raises
        ValidationError for a width not in HISTORY_WIDTHS."""
        if width_s not in HISTORY_WIDTHS:
            raise ValidationError("width", f"must be one of {sorted(HISTORY_WIDTHS)}")
        params: dict[str, Any] = {"h_width": width_s, "since": since, "h_queue": queue}
        if width_s == NARROW:
            stmt = ops.history_since(queue is not None)
        else:
            stmt = ops.wide_history_since(queue is not None)
            params.update(
                h_narrow=NARROW, h_mark_key=rolled_key(width_s), h_from=read_from(since, width_s, None)
            )
        rows = self.tx(lambda c: c.execute(stmt, params).all(), write=False)
        out: dict[str, dict[float, int]] = {}
        for bucket, kind, n in rows:
            out.setdefault(kind, {})[float(bucket)] = int(n)
        return out

    def handler_minutes(self, name: str, since: float) -> dict[int, dict[str, int]]:
        """One statement: the handler's minute buckets, shards summed."""
        rows = self.read(hmin.minutes_since(), {"name": name, "since": int(since)})
        out: dict[int, dict[str, int]] = {}
        for r in rows:
            out.setdefault(int(r["bucket"]), {})[r["field"]] = int(r["n"])
        return out

    def trim_history(self) -> int:
        """Roll the wider widths up (ROLL_BATCH buckets a transaction), then
        drop each width's buckets past its retention (a narrow bucket only
        once rolled up into every wider width), in one transaction. Returns
        the buckets (rows) dropped."""
        marks = []
        for width in WIDER:
            while True:
                mark, more = self.tx(lambda c, w=width: self._roll_up(c, w))
                if not more:
                    marks.append(mark)
                    break

        def body(conn: Connection) -> int:
            now = conn.execute(self._q_now).scalar_one()
            dropped = 0
            for width, keep in HISTORY_WIDTHS.items():
                before = now - keep if width != NARROW else min([now - keep, *marks])
                dropped += conn.execute(ops.trim_history(), {"h_width": width, "h_before": before}).rowcount
            minutes_before = int(now - RETENTION_S)
            return dropped + conn.execute(hmin.trim(), {"before": minutes_before}).rowcount

        return self.tx(body)

    def _roll_up(self, conn: Connection, width: int) -> tuple[float, bool]:
        """Roll up at most ROLL_BATCH ended buckets of ``width`` from the
        narrow ones and move its mark past them, in ``conn``'s transaction,
        which holds the mark's row. Returns the new mark and whether ended
        buckets are left."""
        key = {"h_mark_key": rolled_key(width)}
        now = conn.execute(self._q_now).scalar_one()
        until = now - ROLL_GRACE_S  # what may be rolled up: buckets ended before it
        open_since = self.dialect.writes_since(conn)
        if open_since is not None:  # a change stamped before then may still commit
            until = min(until, open_since + self.clock_offset_s)
        mark = conn.execute(ops.rolled_mark(), key).scalar_one_or_none()
        if mark is None:
            oldest = conn.execute(ops.oldest_bucket(), {"h_width": NARROW}).scalar_one()
            start, _ = roll_span(None, oldest, until, width, ROLL_BATCH)
            conn.execute(ops.first_mark(self.dialect.upsert(counters)), {**key, "h_mark": int(start)})
            mark = conn.execute(ops.rolled_mark(), key).scalar_one()  # another trim's, if it came first
        start, end = roll_span(mark, None, until, width, ROLL_BATCH)
        if end > start:
            bounds = {"h_width": width, "h_narrow": NARROW, "h_low": start, "h_high": end}
            conn.execute(ops.roll_up(self.dialect.upsert(history)), bounds)
            conn.execute(ops.move_mark(), {**key, "h_mark": int(end)})
        return end, roll_span(end, None, until, width, 1)[1] > end


def _queue_state(row: object) -> QueueState:
    r = row  # a mapping
    return QueueState(r["name"], bool(r["paused"]), r["changed_by"], ts(r["changed_at"]))  # type: ignore[index]
