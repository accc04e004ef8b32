"""Handlers of ``make demo``: index the Python standard library, plus long jobs.

``index-source`` parses one ``.py`` file with ``ast`` and stores counts of
lines, functions, classes and imports and its largest function. Files that do
not parse (the standard library ships several on purpose, e.g. the
``badsyntax_*`` test modules) raise SyntaxError, are retried with backoff and
end Failed with the real error. ``long-report`` runs about a minute while its
worker heartbeats the lease, checking ``ctx.cancelled`` between steps.
"""

from __future__ import annotations

import ast
import time
import tokenize
from typing import Any

from workers import JobContext, PermanentError, handler


def index_source_text(text: str, filename: str) -> dict[str, Any]:
    """Counts for one module's source. Raises SyntaxError when it does not parse."""
    tree = ast.parse(text, filename=filename)
    functions, classes, imports = 0, 0, 0
    largest: dict[str, Any] | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions += 1
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            if largest is None or size > largest["lines"]:
                largest = {"name": node.name, "lines": size, "line": node.lineno}
        elif isinstance(node, ast.ClassDef):
            classes += 1
        elif isinstance(node, ast.Import | ast.ImportFrom):
            imports += 1
    return {
        "lines": len(text.splitlines()),
        "functions": functions,
        "classes": classes,
        "imports": imports,
        "largest_function": largest,
    }


@handler("index-source", queue="default", max_retries=2, timeout=60)
def index_source(ctx: JobContext) -> dict[str, Any]:
    """Payload ``{"path": "/usr/lib/python3.11/ast.py"}``; returns the counts."""
    path = ctx.payload.get("path") if isinstance(ctx.payload, dict) else None
    if not isinstance(path, str):
        raise PermanentError("payload needs a 'path' string")
    # tokenize.open honours PEP 263 coding cookies, as the interpreter does.
    with tokenize.open(path) as source:
        text = source.read()
    result = index_source_text(text, path)
    result["path"] = path
    return result


@handler("long-report", queue="reports", max_retries=3, timeout=300)
def long_report(ctx: JobContext) -> dict[str, Any]:
    """Works for ``payload["seconds"]`` (default 60) in half-second steps; the
    worker renews the lease meanwhile. Stops early when ``ctx.cancelled`` is set."""
    seconds = float((ctx.payload or {}).get("seconds", 60))
    started = time.monotonic()
    steps = 0
    while time.monotonic() - started < seconds:
        if ctx.cancelled.wait(0.5):
            raise RuntimeError("stopped: lease lost, canceled or timed out")
        steps += 1
    return {"steps": steps, "seconds": round(time.monotonic() - started, 1), "attempt": ctx.attempt}
