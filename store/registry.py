"""Locks, the worker registry and the run histories (recovery, maintenance),
written once over the record port (store/ports.py) for every engine: a mixin
of ``SharedStore`` that implements those ``OperatingContract`` methods with
the port's calls. Record kinds: ``worker`` (scored by last heartbeat),
``recovery_run`` and ``maintenance_run.<task>`` (scored by start), holds
named after their locks (docs/architecture.md, "Stores").
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from store.errors import WorkerNotFound
from store.parts import Part
from store.ports import MAX_PAGE, Change, Record
from store.records import UNQUIET, LockInfo, MaintenanceRun, RecoveryRun, WorkerInfo
from store.times import ts

WORKER = "worker"
RECOVERY_RUN = "recovery_run"
#: Fields of a worker's entry an operator sets; a heartbeat keeps them.
COMMAND_FIELDS = ("command", "command_by")


def maintenance_kind(task: str) -> str:
    """The record kind of ``task``'s run history."""
    return f"maintenance_run.{task}"


def _epoch(at: datetime | None) -> float | None:
    return at.timestamp() if at else None


def worker_fields(info: WorkerInfo) -> dict[str, Any]:
    """A worker's entry as its heartbeat writes it (every field but
    ``last_seen_at``, the store's clock, and the operator's command)."""
    return {
        "id": info.id,
        "host": info.host,
        "pid": info.pid,
        "queues": list(info.queues),
        "concurrency": info.concurrency,
        "jobs_in_hand": list(info.jobs_in_hand),
        "handlers": list(info.handlers),
        "started_at": _epoch(info.started_at) or time.time(),
    }


def worker_info(record: Record) -> WorkerInfo:
    """A ``worker`` record as a WorkerInfo."""
    v = record.value
    return WorkerInfo(
        id=v.get("id", record.key),
        host=v["host"],
        pid=int(v["pid"]),
        queues=list(v.get("queues") or []),
        concurrency=int(v["concurrency"]),
        jobs_in_hand=list(v.get("jobs_in_hand") or []),
        started_at=ts(v.get("started_at")),
        last_seen_at=ts(v.get("last_seen_at")),
        command=v.get("command"),
        command_by=v.get("command_by"),
        handlers=list(v.get("handlers") or []),
    )


class RegistryRecords(Part):
    """acquire_lock, release_lock, lock_info; worker_heartbeat,
    _command_worker, remove_worker, workers, prune_workers; the recovery and
    maintenance run histories. Needs ``self.settings.recovery_runs_kept``."""

    settings: Any

    # ----------------------------------------------------------------- locks
    def acquire_lock(self, name: str, owner: str, ttl_s: float) -> bool:
        return self.hold(name, owner, float(ttl_s)) is not None

    def release_lock(self, name: str, owner: str) -> bool:
        return self.unhold(name, owner)

    def lock_info(self, name: str) -> LockInfo:
        held = self.held(name)
        return LockInfo(name, held.holder, ts(held.expires_at)) if held else LockInfo(name, None, None)

    # --------------------------------------------------------------- workers
    def worker_heartbeat(self, info: WorkerInfo, *, register: bool = False) -> str | None:
        """One change of the worker's record: every field refreshed,
        ``last_seen_at`` (its score) from the store's clock; the operator's
        command kept, or with ``register`` cleared (a new process)."""
        change = Change(
            set=worker_fields(info),
            drop=COMMAND_FIELDS if register else (),
            stamp=("last_seen_at",),
            score_field="last_seen_at",
        )
        record, _ = self.record_change(WORKER, info.id, change)
        assert record is not None  # created when absent
        return record.value.get("command")

    def _command_worker(self, worker_id: str, command: str, actor: str) -> WorkerInfo:
        if command == UNQUIET:  # clear a pending quiet, and nothing else
            change = Change(drop=COMMAND_FIELDS, when={"command": "quiet"}, create=False)
        else:
            change = Change(set={"command": command, "command_by": actor}, create=False)
        record, _ = self.record_change(WORKER, worker_id, change)
        if record is None:
            raise WorkerNotFound(worker_id)
        return worker_info(record)

    def remove_worker(self, worker_id: str) -> None:
        self.record_drop(WORKER, worker_id)

    def workers(self) -> list[WorkerInfo]:
        return [worker_info(r) for r in self.record_page(WORKER, MAX_PAGE)]

    def prune_workers(self, older_than_s: float) -> list[str]:
        """Every worker whose last heartbeat is older than ``older_than_s``
        (MAX_PAGE a call, until none is left); one that beat meanwhile stays."""
        pruned: list[str] = []
        while True:
            batch = self.record_prune(WORKER, older_than_s=float(older_than_s), limit=MAX_PAGE)
            pruned += batch
            if len(batch) < MAX_PAGE:
                return pruned

    # ------------------------------------------------------- run histories
    def record_recovery_run(self, run: RecoveryRun) -> None:
        """Append a run; the history keeps the newest settings.recovery_runs_kept."""
        self._append_run(RECOVERY_RUN, run.id, run.to_record())

    def recovery_runs(self, limit: int = 50) -> list[RecoveryRun]:
        return [RecoveryRun.from_record(r.value) for r in self._runs(RECOVERY_RUN, limit)]

    def record_maintenance_run(self, run: MaintenanceRun) -> None:
        self._append_run(maintenance_kind(run.task), run.id, run.to_record())

    def maintenance_runs(self, task: str, limit: int = 20) -> list[MaintenanceRun]:
        return [MaintenanceRun.from_record(r.value) for r in self._runs(maintenance_kind(task), limit)]

    def _append_run(self, kind: str, run_id: str, value: dict[str, Any]) -> None:
        change = Change(set=value, score_field="started_at", keep=self.settings.recovery_runs_kept)
        self.record_change(kind, run_id, change)

    def _runs(self, kind: str, limit: int) -> list[Record]:
        return self.record_page(kind, min(limit, MAX_PAGE)) if limit > 0 else []
