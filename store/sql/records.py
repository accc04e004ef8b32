"""The record port (store/ports.py) on SQL: one generic table,
``leasehold_records``, a row per record (a mixin of ``SqlStore``). A change
is one transaction: the row read with the store's clock (row-locked on
PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` serialises writers),
``ports.apply_change`` decides, one INSERT or UPDATE writes. A hold is a
record of kind ``hold`` with its holder, expiry and fencing token in the value.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from store.parts import Part
from store.ports import MAX_PAGE, Change, Hold, Record, apply_change, check_kind
from store.sql import record_statements as rs
from store.sql.schema import records

HOLD = "hold"
#: A change whose INSERT lost to a concurrent one reads the row again, at most this often.
_INSERT_ATTEMPTS = 3


def _record(key: str, row: Any) -> Record:
    expires_in = row["expires_in"]
    score = row["score"]
    return Record(
        key,
        dict(row["value"]),
        None if score is None else float(score),
        None if expires_in is None else float(expires_in),
    )


class SqlRecordsPart(Part):
    """record_change, record_get, record_page, record_drop, record_prune,
    hold, unhold, held."""

    def record_change(self, kind: str, key: str, change: Change) -> tuple[Record | None, bool]:
        check_kind(kind)

        def decide(current: Record | None, now: float) -> tuple[Record | None, bool, dict[str, Any] | None]:
            record, applied = apply_change(current, key, change, now)
            if not applied or record is None:
                return record, False, None
            expires_at = None if record.expires_in is None else now + record.expires_in
            return record, True, {"score": record.score, "expires_at": expires_at, "value": record.value}

        def trim(conn: Connection) -> None:
            if change.keep is not None:
                conn.execute(rs.trim_kind(), {"kind": kind, "keep": change.keep})

        return self._change(kind, key, decide, trim)

    def _change(self, kind: str, key: str, decide: Any, after: Any = None) -> Any:
        """Read the row for update, let ``decide(current or None, now)`` say
        ``(answer..., row or None)``, write the row, then ``after(conn)``; one
        transaction. Returns ``decide``'s result without its last item."""
        insert = rs.insert_record(self.dialect.upsert(records))
        ids = {"kind": kind, "key": key}

        def body(conn: Connection) -> Any:
            for _ in range(_INSERT_ATTEMPTS):
                found = conn.execute(rs.record_for_change(self._now), ids).mappings().first()
                now = float(found["now"]) if found else self.clock(conn)
                current = None
                if found is not None and (found["expires_at"] is None or found["expires_at"] > now):
                    left = None if found["expires_at"] is None else found["expires_at"] - now
                    current = _record(key, {**found, "expires_in": left})
                *answer, row = decide(current, now)
                if row is None:
                    return tuple(answer)
                if found is not None or conn.execute(insert, {**ids, **row}).rowcount:
                    if found is not None:
                        conn.execute(rs.update_record(), {f"u_{k}": v for k, v in {**ids, **row}.items()})
                    if after is not None:
                        after(conn)
                    return tuple(answer)
            raise AssertionError("a record inserted and gone again, repeatedly")  # pragma: no cover

        return self.tx(body)

    def clock(self, conn: Connection) -> float:
        """The store's clock inside ``conn``'s transaction."""
        return float(conn.execute(self._q_now).scalar_one())

    def record_get(self, kind: str, key: str) -> Record | None:
        rows = self.read(rs.get_record(self._now), {"kind": check_kind(kind), "key": key})
        return _record(key, rows[0]) if rows else None

    def record_page(self, kind: str, limit: int, *, oldest_first: bool = False) -> list[Record]:
        params = {"kind": check_kind(kind), "limit": min(limit, MAX_PAGE)}
        return [
            _record(row["key"], row) for row in self.read(rs.page_records(self._now, oldest_first), params)
        ]

    def record_drop(self, kind: str, key: str) -> bool:
        params = {"kind": check_kind(kind), "key": key}
        return self.tx(lambda c: c.execute(rs.drop_record(), params).rowcount) > 0

    def record_prune(self, kind: str, *, older_than_s: float | None, limit: int) -> list[str]:
        params: dict[str, Any] = {"kind": check_kind(kind), "limit": min(limit, MAX_PAGE)}
        if older_than_s is not None:
            params["age"] = float(older_than_s)
        stmt = rs.prune_records(self._now, expired=older_than_s is None)
        return self.tx(lambda c: list(c.execute(stmt, params).scalars()))

    # --------------------------------------------------------------- holds
    def hold(self, name: str, holder: str, ttl_s: float) -> int | None:
        def decide(current: Record | None, now: float) -> tuple[int | None, dict[str, Any] | None]:
            was = current.value if current else {}
            live = was.get("holder") is not None and float(was.get("expires_at") or 0) >= now
            if live and was["holder"] != holder:
                return None, None
            token = int(was.get("token") or 0) + (0 if live else 1)
            value = {"holder": holder, "expires_at": now + ttl_s, "token": token}
            return token, {"score": None, "expires_at": None, "value": value}

        (token,) = self._change(HOLD, name, decide)
        return token

    def unhold(self, name: str, holder: str) -> bool:
        def decide(current: Record | None, now: float) -> tuple[bool, dict[str, Any] | None]:
            if current is None or current.value.get("holder") != holder:
                return False, None
            value = {"holder": None, "expires_at": None, "token": current.value.get("token", 0)}
            return True, {"score": None, "expires_at": None, "value": value}

        (released,) = self._change(HOLD, name, decide)
        return released

    def held(self, name: str) -> Hold | None:
        """One read: the hold's row with the store's clock."""
        rows = self.read(rs.get_record(self._now), {"kind": HOLD, "key": name})
        v = rows[0]["value"] if rows else {}
        if v.get("holder") is None or float(v["expires_at"]) < float(rows[0]["now"]):
            return None
        return Hold(name, v["holder"], float(v["expires_at"]), int(v["token"]))
