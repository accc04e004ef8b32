"""The JobStore contract, continued: whether a store holds the schema this
release expects is a method of its engine (``store.schema_version``'s check
asks it), so nothing above ``store/`` imports an engine and a new engine
changes nothing there.
"""

from __future__ import annotations

import abc


class SchemaContract(abc.ABC):
    """Abstract schema check and upgrade of a store."""

    @abc.abstractmethod
    def schema_revision(self) -> tuple[str | None, str]:
        """``(found, expected)``: the revision the store holds (None: no
        Leasehold schema) and the one this release expects (SQL: Alembic
        revisions; Redis: key layout versions, an absent one written
        first). Raises StoreUnavailable when the store cannot be reached."""
