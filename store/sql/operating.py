"""What the SQL store needs to be operated for months (a mixin of
``SqlStore``): removing jobs (purge, delete), paused queues, pruning dead
workers, the maintenance-run history and the periodic-job schedules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from store.counters import HISTORY_WIDTHS
from store.errors import ScheduleNotFound, ValidationError
from store.lifecycle import EventKind
from store.models import MaintenanceRun, QueueState, Schedule, ts
from store.sql import operating_statements as ops
from store.sql import registry_statements as reg
from store.sql.plumbing import SqlPlumbing, event_row


class SqlOperatingMixin(SqlPlumbing):
    """Retention, queues, worker pruning, maintenance runs, schedules."""

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

    def _purge(self, older_than_s: float, limit: int, statuses: tuple[int, ...]) -> int:
        def body(conn: Connection) -> int:
            params = {"age": older_than_s, "limit": limit, "statuses": list(statuses)}
            rows = conn.execute(ops.purge_candidates(self._now), params).all()
            return self.remove_jobs(conn, [tuple(r) for r in rows]) if rows else 0

        return self.tx(body)

    def _count_purgeable(self, older_than_s: float, statuses: tuple[int, ...]) -> int:
        stmt, params = ops.count_purgeable(self._now), {"age": older_than_s, "statuses": list(statuses)}
        return self.tx(lambda c: c.execute(stmt, params).scalar_one(), write=False)

    # -------------------------------------------------------------- queues
    def _set_paused(self, queue: str, paused: bool, actor: str) -> QueueState:
        kind = EventKind.QUEUE_PAUSED if paused else EventKind.QUEUE_RESUMED
        stmt = reg.set_queue_paused(self.dialect.upsert(reg.queues), self._now)

        def body(conn: Connection) -> QueueState:
            row = conn.execute(stmt, {"name": queue, "paused": int(paused), "actor": actor}).mappings().one()
            self.book(conn, [event_row("", kind, None, None, actor, None, f"queue {queue}")])
            return _queue_state(row)

        return self.tx(body)

    def _record_audit(self, kind: EventKind, actor: str, message: str) -> None:
        self.tx(lambda conn: self.book(conn, [event_row("", kind, None, None, actor, None, message)]))

    def queue_states(self) -> list[QueueState]:
        return [_queue_state(r) for r in self.read(reg.all_queue_states())]

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

    # ------------------------------------------------------------- workers
    def prune_workers(self, older_than_s: float) -> list[str]:
        stmt = reg.stale_workers(self._now)
        return self.tx(lambda c: list(c.execute(stmt, {"age": older_than_s}).scalars()))

    # ---------------------------------------------------- maintenance runs
    def record_maintenance_run(self, run: MaintenanceRun) -> None:
        kept = {"task": run.task, "kept": self.settings.recovery_runs_kept}

        def body(conn: Connection) -> None:
            conn.execute(reg.insert_maintenance_run(), run.to_record())
            conn.execute(reg.trim_maintenance_runs(), kept)

        self.tx(body)

    def maintenance_runs(self, task: str, limit: int = 20) -> list[MaintenanceRun]:
        rows = self.read(reg.recent_maintenance_runs(), {"task": task, "limit": limit})
        return [MaintenanceRun.from_record(r) for r in rows]

    # ----------------------------------------------------------- schedules
    def save_schedules(self, schedules: Sequence[Schedule]) -> None:
        if not schedules:
            return
        stmt = reg.save_schedule(self.dialect.upsert(reg.schedules), self._now)
        rows = [
            {
                "name": s.name,
                "handler": s.handler,
                "cron": s.cron,
                "timezone": s.timezone,
                "queue": s.queue,
                "payload": s.payload,
                "catch_up": int(s.catch_up),
            }
            for s in schedules
        ]
        self.tx(lambda c: c.execute(stmt, rows))

    def schedules(self) -> list[Schedule]:
        return [_schedule(r) for r in self.read(reg.all_schedules())]

    def set_schedule_enabled(self, name: str, enabled: bool) -> Schedule:
        stmt = reg.set_schedule_enabled(self._now)
        rows = self.tx(
            lambda c: c.execute(stmt, {"s_name": name, "s_enabled": int(enabled)}).mappings().all()
        )
        if not rows:
            raise ScheduleNotFound(name)
        return _schedule(rows[0])

    def record_tick(self, name: str, tick_at: float, job_id: str) -> None:
        self.tx(lambda c: c.execute(reg.record_tick(), {"s_name": name, "s_tick": tick_at, "s_job": job_id}))


def _queue_state(row: object) -> QueueState:
    r = row  # a mapping
    return QueueState(r["name"], bool(r["paused"]), r["changed_by"], ts(r["changed_at"]))  # type: ignore[index]


def _schedule(r: object) -> Schedule:
    return Schedule(
        name=r["name"],  # type: ignore[index]
        handler=r["handler"],  # type: ignore[index]
        cron=r["cron"],  # type: ignore[index]
        timezone=r["timezone"],  # type: ignore[index]
        queue=r["queue"],  # type: ignore[index]
        payload=r["payload"],  # type: ignore[index]
        catch_up=bool(r["catch_up"]),  # type: ignore[index]
        enabled=bool(r["enabled"]),  # type: ignore[index]
        last_tick_at=ts(r["last_tick_at"]),  # type: ignore[index]
        last_job_id=r["last_job_id"],  # type: ignore[index]
    )
