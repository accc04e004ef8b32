"""The console's list of batches (``/batches``, in the navigation): newest
first, a keyset page at a time (``store.list_batches``), each row with its
progress and a link to its page (``/batches/<id>``, ``webapp.console.flow_pages``)."""

from __future__ import annotations

from typing import Any

from flask import Response, abort, request

from store.contract_flow import Batch
from store.errors import ValidationError
from webapp.console.blueprint import bp, render_view, store

#: Batches a page of the list shows.
BATCHES_PAGE = 50
_ENDED = ("Completed", "Failed", "Canceled")


def batch_row(batch: Batch) -> dict[str, Any]:
    """A batch with how many of its jobs finished and that as a fraction (0..1)."""
    done = sum(batch.counts.get(s, 0) for s in _ENDED)
    return {"batch": batch, "done": done, "fraction": done / batch.size if batch.size else 1.0}


@bp.get("/batches")
def batches_page() -> Response:
    cursor = request.args.get("cursor") or None
    try:
        page, after = store().list_batches(limit=BATCHES_PAGE, cursor=cursor)
    except ValidationError as exc:
        abort(400, str(exc))
    return render_view(
        "batches.html",
        "partials/batches_table.html",
        rows=[batch_row(b) for b in page],
        next_cursor=after,
        paged=cursor is not None,
    )
