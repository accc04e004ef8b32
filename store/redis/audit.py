"""The audit log of the Redis store (a mixin of RedisStore): a zset of the
operators' events as JSON, scored by their time, written by the job scripts
(lua/lib/events.lua ``record``) in the same call as the change they record.

It is trimmed by age only (``prune_audit``, run by maintenance with
LEASEHOLD_RETENTION_AUDIT), never by count, so a bulk action over any number
of jobs pushes nothing out. Pages are read newest first by score with a
cursor ``<score>:<entries of that score already read>`` (the entries of one
script share its time): a page costs O(log n + page) at any depth. The audit
list of earlier releases is moved into the zset by a handle's first audit
read or prune (lua/audit_migrate.lua).
"""

from __future__ import annotations

from store.contract_operating import MAX_AUDIT_PAGE
from store.errors import ValidationError
from store.lifecycle import EventKind
from store.models import AuditPage
from store.parts import Part
from store.redis import codec

#: Entries one lua/audit_migrate.lua call moves.
MIGRATE_BATCH = 1000


def _cursor(cursor: str | None) -> tuple[str, int]:
    """``(max score for ZRANGE, entries of that score to skip)``."""
    if not cursor:
        return "+inf", 0
    score, sep, skip = cursor.partition(":")
    try:
        value, seen = float(score), int(skip)
    except ValueError:
        value, seen = float("nan"), -1
    if not sep or value != value or seen < 0:
        raise ValidationError("cursor", "is not a cursor of this audit log")
    return score, seen


def audit_cursor_after(read: list[tuple[str, float]], cursor: str | None) -> str:
    """The cursor past ``read`` (entries read after ``cursor``, newest
    first, at least one): the last score and how many of its entries are
    read (those skipped by ``cursor`` too when it is of that score)."""
    last = read[-1][1]
    same = sum(1 for _, score in read if score == last)
    top, skip = _cursor(cursor)
    if cursor and float(top) == last:
        same += skip
    return f"{last!r}:{same}"


class RedisAuditPart(Part):
    """``audit_page``, ``prune_audit`` and ``prune_failures``."""

    _audit_migrated = False

    def _migrate_audit(self) -> None:
        """Move an earlier release's audit list into the zset, once per handle
        before its first audit read or prune (one EXISTS when there is none)."""
        if self._audit_migrated:
            return
        [left] = self._pipe(lambda p: p.exists(self.keys.audit_legacy))
        while left:
            left = int(self._eval(self._lua.audit_migrate, self._route, [MIGRATE_BATCH]))
        self._audit_migrated = True

    def audit_page(self, limit: int = 100, cursor: str | None = None) -> AuditPage:
        if not 1 <= limit <= MAX_AUDIT_PAGE:
            raise ValidationError("limit", f"must be within [1, {MAX_AUDIT_PAGE}]")
        rows = self._audit_rows(cursor, limit + 1)
        page = rows[:limit]
        items = [codec.event_from_json(text) for text, _ in page]
        return AuditPage(items, audit_cursor_after(page, cursor) if len(rows) > limit else None)

    def _audit_rows(self, cursor: str | None, count: int) -> list[tuple[str, float]]:
        """The next ``count`` entries after ``cursor``, newest first, as
        ``(JSON text, score)``. Raises ValidationError for a bad cursor."""
        top, skip = _cursor(cursor)
        self._migrate_audit()
        [rows] = self._pipe(
            lambda p: p.zrange(
                self.keys.audit, top, "-inf", desc=True, byscore=True, offset=skip, num=count, withscores=True
            )
        )
        return list(rows)

    def prune_audit(self, older_than_s: float, limit: int = 1000) -> int:
        """The oldest ``limit`` entries older than the cutoff, read then
        removed by member (ZREM: an entry written meanwhile is never taken)."""
        self._migrate_audit()
        cutoff = self.now() - float(older_than_s)
        [old] = self._pipe(
            lambda p: p.zrange(self.keys.audit, "-inf", f"({cutoff!r}", byscore=True, offset=0, num=limit)
        )
        if not old:
            return 0
        [removed] = self._pipe(lambda p: p.zrem(self.keys.audit, *old))
        return int(removed)

    def _record_audit(self, kind: EventKind, actor: str, message: str) -> None:
        self._eval(self._lua.audit, self._route, self._args(kind.value, actor, message))
