"""Locks, the worker registry and the recovery-run history of the SQL store.
A mixin of ``SqlStore``; none of these touch jobs.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Connection

from store.errors import WorkerNotFound
from store.models import BulkOperation, LockInfo, RecoveryRun, WorkerInfo, ts
from store.records import UNQUIET
from store.sql import registry_statements as reg
from store.sql.plumbing import SqlPlumbing
from store.sql.rows import worker_from_row


class SqlRegistryMixin(SqlPlumbing):
    """Locks (a row per lock with owner and expiry), workers, recovery runs."""

    # ----------------------------------------------------------------- locks
    def acquire_lock(self, name: str, owner: str, ttl_s: float) -> bool:
        stmt = reg.acquire_lock(self.dialect.upsert(reg.locks), self._now)
        got = self.tx(lambda c: c.execute(stmt, {"name": name, "owner": owner, "ttl": ttl_s}).first())
        return got is not None

    def release_lock(self, name: str, owner: str) -> bool:
        res = self.tx(lambda c: c.execute(reg.release_lock(), {"name": name, "owner": owner}))
        return res.rowcount > 0

    def lock_info(self, name: str) -> LockInfo:
        stmt = reg.lock_holder(self._now)
        row = self.tx(lambda c: c.execute(stmt, {"name": name}).first(), write=False)
        return LockInfo(name, row[0], ts(row[1])) if row else LockInfo(name, None, None)

    # --------------------------------------------------------------- workers
    def worker_heartbeat(self, info: WorkerInfo, *, register: bool = False) -> str | None:
        row = {
            "id": info.id,
            "host": info.host,
            "pid": info.pid,
            "queues": list(info.queues),
            "concurrency": info.concurrency,
            "jobs_in_hand": list(info.jobs_in_hand),
            "handlers": list(info.handlers),
            "started_at": info.started_at.timestamp() if info.started_at else time.time(),
        }
        stmt = reg.upsert_worker(self.dialect.upsert(reg.workers), self._now)

        def body(conn: Connection) -> str | None:
            if register:  # a new process: nothing left for an earlier one applies to it
                conn.execute(reg.clear_worker_command(), {"w_id": info.id})
            return conn.execute(stmt, row).scalar_one()

        return self.tx(body)

    def _command_worker(self, worker_id: str, command: str, actor: str) -> WorkerInfo:
        if command == UNQUIET:

            def unquiet(conn: Connection) -> list[Any]:
                conn.execute(reg.clear_worker_command(only="quiet"), {"w_id": worker_id})
                return list(conn.execute(reg.worker_by_id(), {"w_id": worker_id}).mappings().all())

            rows = self.tx(unquiet)
        else:
            params = {"w_id": worker_id, "w_command": command, "w_by": actor}
            rows = self.tx(lambda c: c.execute(reg.command_worker(), params).mappings().all())
        if not rows:
            raise WorkerNotFound(worker_id)
        return worker_from_row(rows[0])

    def remove_worker(self, worker_id: str) -> None:
        self.tx(lambda c: c.execute(reg.delete_worker(), {"id": worker_id}))

    def workers(self) -> list[WorkerInfo]:
        return [worker_from_row(r) for r in self.read(reg.all_workers())]

    # ------------------------------------------------------- recovery runs
    def record_recovery_run(self, run: RecoveryRun) -> None:
        """Append a run and drop those beyond settings.recovery_runs_kept."""
        row = run.to_record()
        kept = {"kept": self.settings.recovery_runs_kept}

        def body(conn: Connection) -> None:
            conn.execute(reg.insert_recovery_run(), row)
            conn.execute(reg.trim_recovery_runs(), kept)

        self.tx(body)

    def recovery_runs(self, limit: int = 50) -> list[RecoveryRun]:
        return [RecoveryRun.from_record(r) for r in self.read(reg.recent_recovery_runs(), {"limit": limit})]

    # ---------------------------------------------------- failure counters
    def _record_failure(self, digest: str, window_s: float) -> int:
        stmt = reg.record_failure(self.dialect.upsert(reg.failures), self._now)
        return self.tx(lambda c: c.execute(stmt, {"f_key": digest, "window": window_s}).first()[0])

    def _failure_count(self, digest: str) -> tuple[int, float]:
        row = self.tx(
            lambda c: c.execute(reg.failure_count(self._now), {"f_key": digest}).first(), write=False
        )
        return (int(row[0]), max(float(row[1]), 0.0)) if row else (0, 0.0)

    def _clear_failures(self, digest: str) -> None:
        self.tx(lambda c: c.execute(reg.clear_failures(), {"f_key": digest}))

    # ----------------------------------------------------- bulk operations
    def save_operation(self, operation: BulkOperation) -> BulkOperation:
        record = operation.to_record()
        params = {"o_id": operation.id, "o_state": operation.state, "o_body": record}
        stmt = reg.save_operation(self.dialect.upsert(reg.operations), self._now)
        created, updated = self.tx(lambda c: c.execute(stmt, params).one())
        return BulkOperation.from_record({**record, "created_at": created, "updated_at": updated})

    def get_operation(self, operation_id: str) -> BulkOperation | None:
        rows = self.read(reg.operation_by_id(), {"o_id": operation_id})
        return _operation(rows[0]) if rows else None

    def operations(self, limit: int = 50, *, unfinished: bool = False) -> list[BulkOperation]:
        return [_operation(r) for r in self.read(reg.recent_operations(unfinished), {"limit": limit})]


def _operation(row: Any) -> BulkOperation:
    return BulkOperation.from_record(
        {
            **row["body"],
            "state": row["state"],
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
        }
    )
