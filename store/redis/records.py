"""The record port (store/ports.py) on Redis (a mixin of ``RedisStore``): a
record is a hash ``{P}:rec:<kind>:<key>`` whose fields are the value's, each
as JSON text (a field set to None is removed), plus ``~s`` (its score) and
``~x`` (its expiry, epoch seconds); a kind with scores is indexed by the zset
``{P}:recs:<kind>``. Changes are three functions of the library:
lua/record_change.lua, lua/record_hold.lua, lua/record_prune.lua; reads are
plain commands, and the store's clock (lua/now.lua) where an expiry is compared.
"""

from __future__ import annotations

from typing import Any

import orjson

from store.parts import Part
from store.ports import MAX_PAGE, Change, Hold, Record, check_kind

HOLD = "hold"
#: Hash fields that are not the value's: score, expiry, the mark of an empty record.
META = ("~s", "~x", "~n")


def _text(value: Any) -> str:
    return orjson.dumps(value).decode()


def _pairs(items: Any) -> list[Any]:
    flat: list[Any] = []
    for name, value in items:
        flat += [name, value]
    return [len(flat) // 2, *flat]


def _names(names: Any) -> list[Any]:
    names = list(names)
    return [len(names), *names]


def _record(key: str, fields: dict[str, str], now: float) -> Record | None:
    """A record from its hash (None when empty or expired at ``now``)."""
    if not fields:
        return None
    expires = float(fields["~x"]) if "~x" in fields else None
    if expires is not None and expires <= now:
        return None
    value = {k: orjson.loads(v) for k, v in fields.items() if k not in META}
    score = float(fields["~s"]) if "~s" in fields else None
    return Record(key, value, score, None if expires is None else expires - now)


class RedisRecordsPart(Part):
    """record_change, record_get, record_page, record_drop, record_prune,
    hold, unhold, held."""

    def record_change(self, kind: str, key: str, change: Change) -> tuple[Record | None, bool]:
        """One call of lua/record_change.lua; a None in ``set`` removes the field."""
        check_kind(kind)
        rise_field, rise_to = change.rise if change.rise is not None else ("", 0.0)
        sets = [(f, _text(v)) for f, v in change.set.items() if v is not None]
        drops = [*change.drop, *(f for f, v in change.set.items() if v is None)]
        when = [(f, "" if v is None else _text(v)) for f, v in (change.when or {}).items()]
        args: list[Any] = [self._offset(), kind, key, "1" if change.create else "0"]
        args += ["" if change.ttl_s is None else repr(float(change.ttl_s)), change.score_field or ""]
        args += ["" if change.keep is None else int(change.keep), rise_field, repr(float(rise_to))]
        args += _pairs(when)
        args += _pairs((f, _text(v)) for f, v in change.init.items() if v is not None)
        args += _names(change.stamp_new) + _pairs(sets) + _names(drops)
        args += _pairs((f, int(n)) for f, n in change.add.items()) + _names(change.stamp)
        reply = self._eval(self._lua.record_change, self._route, args)
        if not reply:
            return None, False
        applied, now, flat = int(reply[0]), float(reply[1]), reply[2:]
        fields = dict(zip(flat[::2], flat[1::2], strict=True))
        return _record(key, fields, now), applied == 1

    def _alive(self, key: str, fields: dict[str, str]) -> Record | None:
        """The record of ``fields``, reading the store's clock (one more round
        trip) only when it can expire: TIME is not pipelined, which Redis
        Cluster clients refuse."""
        return _record(key, fields, self.now() if "~x" in fields else 0.0)

    def record_get(self, kind: str, key: str) -> Record | None:
        check_kind(kind)
        [fields] = self._pipe(lambda p: p.hgetall(self.keys.record(kind, key)))
        return self._alive(key, fields)

    def record_page(self, kind: str, limit: int, *, oldest_first: bool = False) -> list[Record]:
        """Two round trips: the index's keys, then their hashes."""
        check_kind(kind)
        limit = min(limit, MAX_PAGE)
        if limit <= 0:
            return []
        index = self.keys.record_index(kind)
        [keys] = self._pipe(lambda p: p.zrange(index, 0, limit - 1, desc=not oldest_first))
        hashes = self._pipe(lambda p: [p.hgetall(self.keys.record(kind, k)) for k in keys])
        now = self.now() if any("~x" in h for h in hashes) else 0.0
        found = [r for k, h in zip(keys, hashes, strict=True) if (r := _record(k, h, now)) is not None]
        sign = 1.0 if oldest_first else -1.0
        return sorted(found, key=lambda r: (sign * (r.score or 0.0), r.key))

    def record_drop(self, kind: str, key: str) -> bool:
        check_kind(kind)
        record = self.keys.record(kind, key)
        deleted, _ = self._pipe(lambda p: (p.delete(record), p.zrem(self.keys.record_index(kind), key)))
        return int(deleted) > 0

    def record_prune(self, kind: str, *, older_than_s: float | None, limit: int) -> list[str]:
        age = "" if older_than_s is None else repr(float(older_than_s))
        args = [self._offset(), check_kind(kind), age, min(limit, MAX_PAGE)]
        return list(self._eval(self._lua.record_prune, self._route, args))

    # --------------------------------------------------------------- holds
    def hold(self, name: str, holder: str, ttl_s: float) -> int | None:
        args = [self._offset(), name, _text(holder), repr(float(ttl_s))]
        token = self._eval(self._lua.record_hold, self._route, args)
        return None if token is None else int(token)

    def unhold(self, name: str, holder: str) -> bool:
        return self._eval(self._lua.record_hold, self._route, [self._offset(), name, _text(holder), ""]) == 1

    def held(self, name: str) -> Hold | None:
        key = self.keys.record(HOLD, name)
        [(holder, expires_at, token)] = self._pipe(lambda p: p.hmget(key, "holder", "expires_at", "token"))
        if holder is None or float(expires_at) < self.now():
            return None
        return Hold(name, orjson.loads(holder), float(expires_at), int(token))
