"""The Handlers page: the handler catalogue the live workers publish, each
handler with its queue and defaults, its schedule, the workers serving it and
its figures (waiting, completed and failed in the last hour, run time
p50/p95: store.handler_figures), one click from its jobs."""

from __future__ import annotations

from flask import Response

from store.catalogue import catalogue
from store.handler_figures import WINDOW_S, figures
from webapp.console.blueprint import bp, render_view, store


@bp.get("/handlers")
def handlers_page() -> Response:
    st = store()
    entries = list(catalogue(st).values())
    now_s = st.now()
    rows = [(entry, figures(st, entry.name, now_s)) for entry in entries]
    capped = any(f.capped for _, f in rows)
    return render_view(
        "handlers.html", "partials/handlers_table.html", rows=rows, capped=capped, window_s=WINDOW_S
    )
