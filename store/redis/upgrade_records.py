"""Layout 2 to 3 of the Redis store: the records of layout 2 (one key shape
and one Lua script per feature) become records of the record port,
``{P}:rec:<kind>:<key>`` hashes indexed by ``{P}:recs:<kind>``
(store/redis/records.py). A step of ``leasehold db upgrade``
(store/redis/upgrade.py ``STEPS``).

Idempotent and order-independent: each old key is found by SCAN (MATCH under
the deployment's prefix, BATCH keys a round trip), its record is written
field by field with HSETNX (a field a new-version process wrote already
wins) and ZADD NX, then the old key is deleted, in one MULTI; a second run
finds nothing left to move. Safe while workers of this version run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from store.redis.store import RedisStore

#: Keys one SCAN round trip asks for, and moved per pipeline.
BATCH = 500
#: Layout 2's record keys, after the prefix (``{P}:``).
OLD_SINGLE = (
    "workers",
    "schedules",
    "recovery_runs",
    "operations",
    "operations:created",
    "operations:unfinished",
)


def _glob(text: str) -> str:
    """``text`` as a SCAN MATCH pattern matching itself."""
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _number(text: str | None) -> float | None:
    return None if text in (None, "") else float(text)  # type: ignore[arg-type]


class Mover:
    """Writes layout-3 records for one store, in MULTI pipelines."""

    def __init__(self, store: RedisStore) -> None:
        self.store = store
        self.client = store._client
        self.base = store.keys.route  # "{P}:"
        self.moved = 0

    def scan(self, pattern: str) -> Iterator[list[str]]:
        """Batches of keys matching ``{P}:<pattern>`` (SCAN, BATCH a call)."""
        batch: list[str] = []
        for key in self.client.scan_iter(match=_glob(self.base) + pattern, count=BATCH):
            batch.append(key if isinstance(key, str) else key.decode())
            if len(batch) >= BATCH:
                yield batch
                batch = []
        if batch:
            yield batch

    def write(self, pipe: Any, kind: str, key: str, fields: dict[str, Any], score: float | None) -> None:
        """Queue a record's fields (values as the port keeps them: JSON texts;
        ``~``-fields as given), never replacing one that exists."""
        target = self.store.keys.record(kind, key)
        for name, value in fields.items():
            if value is None:
                continue
            pipe.hsetnx(target, name, value if name.startswith("~") else _json(value))
        if score is not None:
            pipe.hsetnx(target, "~s", repr(float(score)))
            pipe.zadd(self.store.keys.record_index(kind), {key: float(score)}, nx=True)
        self.moved += 1

    def hashes(self, pattern: str, convert: Callable[[str, dict[str, str], Any], None]) -> None:
        """Move every hash ``{P}:<pattern>``: ``convert(name, fields, pipe)``
        queues its record; the old hash is deleted in the same MULTI."""
        cut = len(self.base) + len(pattern) - 1  # the name after "<literal>:"
        for keys in self.scan(pattern):
            read = self.client.pipeline(transaction=False)
            for key in keys:
                read.hgetall(key)
            found = read.execute()
            pipe = self.client.pipeline(transaction=True)
            for key, fields in zip(keys, found, strict=True):
                if fields:
                    convert(key[cut:], fields, pipe)
                pipe.delete(key)
            pipe.execute()

    def zset_of_json(self, old: str, kind: str) -> None:
        """Move a run history (a zset of runs as JSON, score started_at), then delete it."""
        entries = self.client.zrange(old, 0, -1, withscores=True)
        for start in range(0, len(entries), BATCH):
            pipe = self.client.pipeline(transaction=True)
            for text, score in entries[start : start + BATCH]:
                run = orjson.loads(text)
                self.write(pipe, kind, run["id"], run, score)
            pipe.execute()
        self.client.delete(old)


def move_records(store: RedisStore) -> dict[str, int]:
    """Move every record of layout 2 to layout 3; ``{"records_moved": n}``."""
    m = Mover(store)
    c, p = m.client, m.base

    def worker(name: str, h: dict[str, str], pipe: Any) -> None:
        fields: dict[str, Any] = {
            "id": h.get("id", name),
            "host": h.get("host"),
            "pid": int(h.get("pid") or 0),
            "queues": orjson.loads(h.get("queues") or "[]"),
            "concurrency": int(h.get("concurrency") or 0),
            "jobs_in_hand": orjson.loads(h.get("jobs_in_hand") or "[]"),
            "handlers": orjson.loads(h.get("handlers") or "[]"),
            "started_at": _number(h.get("started_at")),
            "last_seen_at": _number(h.get("last_seen_at")),
            "command": h.get("command"),
            "command_by": h.get("command_by"),
        }
        if h.get("host") is not None:  # a stray "handlers" field alone is no worker
            m.write(pipe, "worker", name, fields, fields["last_seen_at"])

    def lock(name: str, h: dict[str, str], pipe: Any) -> None:
        fields = {"holder": h.get("owner"), "expires_at": _number(h.get("expires_at")), "token": 1}
        m.write(pipe, "hold", name, fields, None)

    def failure(name: str, h: dict[str, str], pipe: Any) -> None:
        end = _number(h.get("window_end")) or time.time()
        m.write(pipe, "failure", name, {"n": int(h.get("n") or 0), "~x": repr(end)}, None)
        pipe.pexpire(store.keys.record("failure", name), max(1, int((end - time.time()) * 1000) + 1000))

    def schedule(name: str, h: dict[str, str], pipe: Any) -> None:
        created = time.time()
        fields = {
            "name": h.get("name", name),
            "handler": h.get("handler"),
            "cron": h.get("cron"),
            "timezone": h.get("timezone"),
            "queue": h.get("queue"),
            "payload": orjson.loads(h.get("payload") or "null"),
            "catch_up": h.get("catch_up", "1") == "1",
            "enabled": h.get("enabled", "1") == "1",
            "last_tick_at": _number(h.get("last_tick_at")),
            "last_job_id": h.get("last_job_id"),
            "created_at": created,
            "updated_at": created,
        }
        m.write(pipe, "schedule", name, fields, created)

    m.hashes("worker:*", worker)
    m.hashes("lock:*", lock)
    m.hashes("failure:*", failure)
    m.hashes("schedule:*", schedule)
    m.zset_of_json(p + "recovery_runs", "recovery_run")
    for keys in m.scan("maintenance_runs:*"):
        for key in keys:
            m.zset_of_json(key, f"maintenance_run.{key[len(p) + len('maintenance_runs:') :]}")
    _move_operations(m)
    c.delete(*(p + k for k in OLD_SINGLE))
    return {"records_moved": m.moved}


def _move_operations(m: Mover) -> None:
    """Bulk operations: the ``operations`` hash of JSON records and its two
    zsets become ``operation`` records and the ``operation.open`` index."""
    old = m.base + "operations"
    unfinished = set(m.client.zrange(old + ":unfinished", 0, -1))
    cursor = 0
    while True:
        cursor, found = m.client.hscan(old, cursor, count=BATCH)
        pipe = m.client.pipeline(transaction=True)
        for op_id, text in found.items():
            record = orjson.loads(text)
            for field in ("created_at", "updated_at"):
                record[field] = _number(record.get(field))
            if record.get("filter") == []:  # cjson wrote an empty table as an array
                record["filter"] = {}
            m.write(pipe, "operation", op_id, record, record["created_at"])
            if op_id in unfinished:
                m.write(
                    pipe, "operation.open", op_id, {"created_at": record["created_at"]}, record["created_at"]
                )
            pipe.hdel(old, op_id)
        pipe.execute()
        if cursor == 0:
            return
