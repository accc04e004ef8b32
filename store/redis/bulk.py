"""Bulk operations and audit-only entries of the Redis store (a mixin of
RedisStore): an operation's record as JSON in a hash, indexed by creation
time, with a second index of the unfinished ones (the order they run in)."""

from __future__ import annotations

import orjson

from store.lifecycle import EventKind
from store.models import BulkOperation
from store.redis import codec
from store.redis.plumbing import RedisPlumbing


class BulkMixin(RedisPlumbing):
    """save_operation, get_operation, operations, _record_audit."""

    def save_operation(self, operation: BulkOperation) -> BulkOperation:
        record = codec.dumps(operation.to_record())
        args = [self._offset(), operation.id, record, 0 if operation.finished else 1]
        text = self._eval(self._lua.operation_save, self._route, args)
        return _operation(text)

    def get_operation(self, operation_id: str) -> BulkOperation | None:
        [text] = self._pipe(lambda p: p.hget(self.keys.operations, operation_id))
        return _operation(text) if text else None

    def operations(self, limit: int = 50, *, unfinished: bool = False) -> list[BulkOperation]:
        k = self.keys
        if unfinished:
            [ids] = self._pipe(lambda p: p.zrange(k.operations_unfinished, 0, limit - 1))
        else:
            [ids] = self._pipe(lambda p: p.zrange(k.operations_created, 0, limit - 1, desc=True))
        if not ids:
            return []
        [texts] = self._pipe(lambda p: p.hmget(k.operations, ids))
        return [_operation(t) for t in texts if t]

    def _record_audit(self, kind: EventKind, actor: str, message: str) -> None:
        self._eval(self._lua.audit, self._route, self._args(kind.value, actor, message))


def _operation(text: str) -> BulkOperation:
    record = orjson.loads(text)
    for field in ("created_at", "updated_at"):
        if record.get(field) is not None:
            record[field] = float(record[field])
    if record.get("filter") == []:  # cjson writes an empty table as an array
        record["filter"] = {}
    return BulkOperation.from_record(record)
