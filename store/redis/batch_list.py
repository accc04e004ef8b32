"""Batches newest first on the Redis store (``store/batch_list.py``): the
sorted set ``{P}:batch_index`` holds every batch id at score 0, so its
lexical order is the ids' (UUIDv7: creation order) and a page is one
ZRANGE BYLEX REV. ``create_batch`` adds the id before the batch is written
(``index_batch``): a failed write leaves an id with no record, which a page
skips; a batch is never missing from the index."""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from store.batch_list import check_page
from store.contract_flow import Batch
from store.errors import JobNotFound
from store.parts import Part


class RedisBatchListPart(Part):
    """``list_batches`` of ``RedisStore`` (uses ``RedisBatchesPart.get_batch``)."""

    def _batch_index(self) -> str:
        return self.keys._key("batch_index")  # type: ignore[attr-defined,no-any-return]

    def index_batch(self, batch_id: str) -> None:
        """Add ``batch_id`` to the listing's index (before the batch is written)."""
        self._pipe(lambda p: p.zadd(self._batch_index(), {batch_id: 0}))  # type: ignore[attr-defined]

    def list_batches(self, limit: int = 50, cursor: str | None = None) -> tuple[list[Batch], str | None]:
        after = check_page(limit, cursor)
        top = f"({after}" if after else "+"
        client: Any = self._client  # type: ignore[attr-defined]
        page: list[Batch] = []
        last: str | None = None
        while True:
            ids = client.zrange(self._batch_index(), top, "-", desc=True, bylex=True, offset=0, num=limit + 1)
            for batch_id in ids:
                if len(page) == limit:
                    return page, last
                with suppress(JobNotFound):  # indexed, but its write failed: skipped
                    page.append(self.get_batch(batch_id))  # type: ignore[attr-defined]
                last = batch_id
            if len(ids) <= limit:
                return page, None
            top = f"({ids[-1]}"
