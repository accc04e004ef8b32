"""The Handlers page: the handler catalogue the live workers publish, each
handler with its queue and defaults, its schedule and the workers serving
it, one click from its jobs."""

from __future__ import annotations

from flask import Response

from store.catalogue import catalogue
from webapp.console.blueprint import bp, render_view, store


@bp.get("/handlers")
def handlers_page() -> Response:
    entries = list(catalogue(store()).values())
    return render_view("handlers.html", "partials/handlers_table.html", entries=entries)
