"""Batches newest first on the SQL store: a keyset page of the ``batches``
table by id (UUIDv7: creation order), each with its counts (``store/batch_list.py``)."""

from __future__ import annotations

from sqlalchemy import Connection, Select, bindparam, select

from store.batch_list import check_page
from store.contract_flow import Batch
from store.parts import Part
from store.sql.schema import batches


def newest_batch_ids(after: bool) -> Select:
    """Ids of the newest batches (below ``:cursor`` when ``after``). Params: limit[, cursor]."""
    stmt = select(batches.c.id).order_by(batches.c.id.desc()).limit(bindparam("limit"))
    return stmt.where(batches.c.id < bindparam("cursor")) if after else stmt


class SqlBatchListPart(Part):
    """``list_batches`` of ``SqlStore`` (uses ``SqlBatchesPart._batch``)."""

    def list_batches(self, limit: int = 50, cursor: str | None = None) -> tuple[list[Batch], str | None]:
        after = check_page(limit, cursor)

        def body(conn: Connection) -> tuple[list[Batch], str | None]:
            params = {"limit": limit + 1, **({"cursor": after} if after else {})}
            ids = list(conn.execute(newest_batch_ids(after is not None), params).scalars())
            page = [self._batch(conn, i) for i in ids[:limit]]  # type: ignore[attr-defined]
            return page, (ids[limit - 1] if len(ids) > limit else None)

        return self.tx(body, write=False)  # type: ignore[attr-defined,no-any-return]
