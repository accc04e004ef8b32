"""The Handlers page: the handler catalogue the live workers publish, each
handler with its queue and defaults, its retry policy (the store's backoff
under the handler's own values), its schedule, the workers serving it and
its figures (waiting, completed and failed in the last hour, run time
p50/p95: store.handler_figures), one click from its jobs; and a handler's
page, ``/handlers/<name>``: its runs and run time per bucket over 1 h, 24 h
or 7 d (store/handler_metrics.py), as server-rendered SVG graphs (the
history graphs' pieces, webapp/console/history.py) and a table."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flask import Response, request, url_for

from store import handler_metrics as hm
from store.catalogue import catalogue
from store.handler_figures import WINDOW_S, figures
from webapp.console.blueprint import bp, render_view, store
from webapp.console.history import Graph, Range, Series


@bp.get("/handlers")
def handlers_page() -> Response:
    st = store()
    entries = list(catalogue(st).values())
    now_s = st.now()
    rows = [(entry, figures(st, entry.name, now_s)) for entry in entries]
    capped = any(f.capped for _, f in rows)
    return render_view(
        "handlers.html",
        "partials/handlers_table.html",
        rows=rows,
        capped=capped,
        window_s=WINDOW_S,
        retry_default=st.settings.retry,
    )


#: The page's windows as history ranges (bins of store/handler_metrics.py WINDOWS).
WINDOW_RANGES: dict[str, Range] = {
    "1h": Range("1h", "1 hour", 60, 60, 60, "minute", "%H:%M"),
    "24h": Range("24h", "24 hours", 60, 900, 96, "15 minutes", "%d %b %H:%M"),
    "7d": Range("7d", "7 days", 60, 3600, 168, "hour", "%d %b %H:%M"),
}


def _graphs(buckets: list[dict[str, Any]], fmt: str) -> list[Graph]:
    """The runs graph (counts) and the run-time graph (percentiles, ms; the
    line breaks at a bucket without runs) of the window's buckets."""
    labels = [datetime.fromtimestamp(b["start"], UTC).strftime(fmt) for b in buckets]
    runs = [
        Series("completed", "Succeeded", [b["succeeded"] for b in buckets]),
        Series("failed", "Failed", [b["failed"] for b in buckets]),
        Series("retried", "Retried", [b["retried"] for b in buckets]),
    ]
    times = [
        Series(f"p{p}", f"p{p} ms", [_ms(b["run_time_ms"][f"p{p}"]) for b in buckets]) for p in (50, 95, 99)
    ]
    return [Graph("runs", "Runs", runs, labels), Graph("run-time", "Run time (ms)", times, labels)]


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


@bp.get("/handlers/<path:name>")
def handler_page(name: str) -> Response:
    """A handler's metrics over ``?window=`` (1h, 24h, 7d; 1h for anything else)."""
    window = request.args.get("window", "1h")
    window = window if window in WINDOW_RANGES else "1h"
    rng = WINDOW_RANGES[window]
    found = hm.metrics(store(), name, window)
    buckets = found["buckets"]
    links = [
        (r.key, r.label, url_for("console.handler_page", name=name, window=r.key))
        for r in WINDOW_RANGES.values()
    ]
    return render_view(
        "handler.html",
        "partials/handler_metrics.html",
        handler=name,
        rng=rng,
        links=links,
        graphs=_graphs(buckets, rng.fmt),
        buckets=buckets,
        since=datetime.fromtimestamp(buckets[0]["start"], UTC),
    )
