"""The audit log of the SQL store (a mixin of SqlStore): operator actions are
job events whose actor starts with ``operator:``, read and pruned through the
partial index leasehold_ix_job_events_audit (by id, the order they were
written in).

An entry stays for its retention (LEASEHOLD_RETENTION_AUDIT), whatever the
number written meanwhile: ``purge`` and ``delete`` keep operator actions, and
only ``prune_audit`` removes them, by age.
"""

from __future__ import annotations

from store.contract_operating import MAX_AUDIT_PAGE
from store.errors import ValidationError
from store.models import AuditPage
from store.parts import Part
from store.sql import operating_statements as ops
from store.sql.rows import event_from_row

#: ``before`` of the first page: above every event id.
_FIRST = 2**62


class SqlAuditPart(Part):
    """``audit_page`` and ``prune_audit``."""

    def audit_page(self, limit: int = 100, cursor: str | None = None) -> AuditPage:
        """See the contract; the cursor is the last entry's event id."""
        if not 1 <= limit <= MAX_AUDIT_PAGE:
            raise ValidationError("limit", f"must be within [1, {MAX_AUDIT_PAGE}]")
        before = _FIRST
        if cursor:
            if not cursor.isdigit() or not 0 < int(cursor) < _FIRST:
                raise ValidationError("cursor", "is not a cursor of this audit log")
            before = int(cursor)
        rows = self.read(ops.audit_page(), {"before": before, "limit": limit + 1})
        more = len(rows) > limit
        items = [event_from_row(r) for r in rows[:limit]]
        return AuditPage(items, str(rows[limit - 1]["id"]) if more else None)

    def prune_audit(self, older_than_s: float, limit: int = 1000) -> int:
        """One DELETE of the old entries among the ``limit`` oldest."""
        stmt = ops.prune_audit(self._now)
        return int(self.tx(lambda c: c.execute(stmt, {"age": float(older_than_s), "limit": limit}).rowcount))
