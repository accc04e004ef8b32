"""Bulk operations, periodic-job schedules and counting windows (login
failures, the search rate limit), written once over the record port
(store/ports.py) for every engine: a mixin of ``SharedStore``. Record kinds:
``operation`` (scored by creation) with ``operation.open`` (the unfinished
ones, oldest first: the order they run in), ``schedule`` and ``failure``
(expiring windows keyed by a digest) (docs/architecture.md, "Stores").
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from store.errors import ScheduleNotFound, ValidationError
from store.parts import Part
from store.ports import MAX_PAGE, Change, Record
from store.records import BulkOperation, Schedule
from store.times import ts

OPERATION = "operation"
OPEN_OPERATION = "operation.open"
SCHEDULE = "schedule"
FAILURE = "failure"
#: Longest failure window (s): a day.
MAX_FAILURE_WINDOW_S = 86400.0


def failure_digest(key: str) -> str:
    """What stores keep of a failure key: its SHA-256, 64 hex characters
    (bounded, and no user-provided text in key names)."""
    return hashlib.sha256(key.encode()).hexdigest()


def operation_from(record: Record) -> BulkOperation:
    """An ``operation`` record as a BulkOperation."""
    absent = dict.fromkeys(("cursor", "error", "created_at", "updated_at"))  # None fields are not kept
    return BulkOperation.from_record({**absent, **record.value})


def schedule_from(record: Record) -> Schedule:
    """A ``schedule`` record as a Schedule."""
    v = record.value
    return Schedule(
        name=v["name"],
        handler=v["handler"],
        cron=v["cron"],
        timezone=v["timezone"],
        queue=v["queue"],
        payload=v.get("payload"),
        catch_up=bool(v["catch_up"]),
        enabled=bool(v.get("enabled", True)),
        last_tick_at=ts(v.get("last_tick_at")),
        last_job_id=v.get("last_job_id"),
    )


class Bookings(Part):
    """save_operation, get_operation, operations; save_schedules, schedules,
    set_schedule_enabled, record_tick; record_failure, failure_count,
    clear_failures, prune_failures."""

    # ----------------------------------------------------- bulk operations
    def save_operation(self, operation: BulkOperation) -> BulkOperation:
        """Insert or replace by id: ``updated_at`` stamped, ``created_at``
        kept (stamped when new). A new unfinished operation (no
        ``created_at`` yet) is entered in ``operation.open`` before its record
        is written, and a finished one leaves it after, so a crash in between
        leaves at worst an entry that ``operations(unfinished=True)`` skips,
        never an unlisted runnable one; the saves of its progress in between
        change the record alone."""
        value = {k: v for k, v in operation.to_record().items() if k not in ("created_at", "updated_at")}
        if not operation.finished and operation.created_at is None:
            opened = Change(stamp_new=("created_at",), score_field="created_at")
            self.record_change(OPEN_OPERATION, operation.id, opened)
        change = Change(set=value, stamp=("updated_at",), stamp_new=("created_at",), score_field="created_at")
        record, _ = self.record_change(OPERATION, operation.id, change)
        assert record is not None  # created when absent
        if operation.finished:
            self.record_drop(OPEN_OPERATION, operation.id)
        return operation_from(record)

    def get_operation(self, operation_id: str) -> BulkOperation | None:
        record = self.record_get(OPERATION, operation_id)
        return operation_from(record) if record else None

    def operations(self, limit: int = 50, *, unfinished: bool = False) -> list[BulkOperation]:
        limit = min(limit, MAX_PAGE)
        if limit <= 0:
            return []
        if not unfinished:
            return [operation_from(r) for r in self.record_page(OPERATION, limit)]
        found: list[BulkOperation] = []
        for entry in self.record_page(OPEN_OPERATION, limit, oldest_first=True):
            record = self.record_get(OPERATION, entry.key)
            operation = operation_from(record) if record else None
            if operation is not None and not operation.finished:
                found.append(operation)
        return found

    # ----------------------------------------------------------- schedules
    def save_schedules(self, schedules: Sequence[Schedule]) -> None:
        """Upsert each declared schedule's definition; ``enabled`` and the
        last tick are written only when the schedule is new."""
        for s in schedules:
            definition: dict[str, Any] = {
                "name": s.name,
                "handler": s.handler,
                "cron": s.cron,
                "timezone": s.timezone,
                "queue": s.queue,
                "payload": s.payload,
                "catch_up": bool(s.catch_up),
            }
            change = Change(
                set=definition,
                init={"enabled": True, "last_tick_at": None, "last_job_id": None},
                stamp=("updated_at",),
                stamp_new=("created_at",),
                score_field="created_at",
            )
            self.record_change(SCHEDULE, s.name, change)

    def schedules(self) -> list[Schedule]:
        found = [schedule_from(r) for r in self.record_page(SCHEDULE, MAX_PAGE)]
        return sorted(found, key=lambda s: s.name)

    def set_schedule_enabled(self, name: str, enabled: bool) -> Schedule:
        change = Change(set={"enabled": bool(enabled)}, stamp=("updated_at",), create=False)
        record, _ = self.record_change(SCHEDULE, name, change)
        if record is None:
            raise ScheduleNotFound(name)
        return schedule_from(record)

    def record_tick(self, name: str, tick_at: float, job_id: str) -> None:
        tick = float(tick_at)
        change = Change(
            set={"last_tick_at": tick, "last_job_id": job_id}, rise=("last_tick_at", tick), create=False
        )
        self.record_change(SCHEDULE, name, change)

    # ---------------------------------------------------- counting windows
    def record_failure(self, key: str, window_s: float) -> int:
        if not (isinstance(window_s, int | float) and 0 < window_s <= MAX_FAILURE_WINDOW_S):
            raise ValidationError("window_s", f"must be within (0, {MAX_FAILURE_WINDOW_S:g}] seconds")
        change = Change(add={"n": 1}, ttl_s=float(window_s))
        record, _ = self.record_change(FAILURE, failure_digest(key), change)
        assert record is not None  # created when absent
        return int(record.value["n"])

    def failure_count(self, key: str) -> tuple[int, float]:
        record = self.record_get(FAILURE, failure_digest(key))
        if record is None:
            return 0, 0.0
        return int(record.value["n"]), max(float(record.expires_in or 0.0), 0.0)

    def clear_failures(self, key: str) -> None:
        self.record_drop(FAILURE, failure_digest(key))

    def prune_failures(self, limit: int = 1000) -> int:
        return len(self.record_prune(FAILURE, older_than_s=None, limit=min(limit, MAX_PAGE)))
