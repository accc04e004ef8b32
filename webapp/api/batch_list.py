"""``GET /api/batches``: batches newest first, a keyset page at a time
(``store.list_batches``), each as ``GET /api/batches/<id>`` gives it plus
``created_at``. Registered by ``webapp.api.routes`` (its ROUTES table): a
viewer token reads it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from store.batch_list import MAX_BATCH_PAGE
from store.contract_flow import Batch
from store.times import iso
from webapp.api.common import context_of
from webapp.api.schemas import DateTime
from webapp.api.state import job_store

_UUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"


class ListBatchesQuery(BaseModel):
    """Paging of GET /api/batches (newest first)."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(50, ge=1, le=MAX_BATCH_PAGE)
    cursor: str | None = Field(
        None, pattern=_UUID, description="next_cursor of the page before; omit for the first"
    )


class BatchItem(BaseModel):
    """A batch of the list: its counts by status, callback, whether finished, when created."""

    id: str
    kind: str
    size: int
    counts: dict[str, int]
    callback_job_id: str | None
    finished: bool
    canceled_by: str | None
    created_at: DateTime | None = Field(description="RFC 3339, UTC")


class BatchPage(BaseModel):
    items: list[BatchItem]
    next_cursor: str | None = Field(description="pass as ?cursor= for the next page; null on the last")


def batch_item(batch: Batch) -> dict[str, Any]:
    """A batch's JSON with ``created_at`` (RFC 3339)."""
    created = None if batch.created_at is None else datetime.fromtimestamp(batch.created_at, UTC)
    return {**batch.to_json(), "created_at": iso(created)}


def list_batches() -> dict[str, Any]:
    """Batches, newest first, `limit` a page; `next_cursor` (null on the last
    page) goes back as `?cursor=` for the next. 422 naming `limit` or `cursor`."""
    q: ListBatchesQuery = context_of("query", ListBatchesQuery)
    page, cursor = job_store().list_batches(limit=q.limit, cursor=q.cursor)
    return {"items": [batch_item(b) for b in page], "next_cursor": cursor}
