# ruff: noqa: F811 - the fixtures are imported from console_fixtures and requested by name
"""The console's audit page reads the audit log a page at a time (store.audit_page),
so every entry can be reached however many were written, each page at a bounded cost."""

from __future__ import annotations

import html as html_lib
import re

from store.base import JobStore
from store.lifecycle import EventKind
from tests.web.console_fixtures import (  # noqa: F401 - fixtures
    ConsoleClient,
    console_app,
    viewer,
)
from webapp.console.views import AUDIT_LIMIT


def _older_link(page: str) -> str | None:
    found = re.search(r'href="([^"]*cursor=[^"]*)" rel="next"', page)
    return html_lib.unescape(found.group(1)) if found else None


def test_every_entry_is_reached_page_by_page(viewer: ConsoleClient, store: JobStore) -> None:
    total = AUDIT_LIMIT + 5
    for i in range(total):
        store.record_action("operator:ann", EventKind.WORKER_FORGOTTEN, f"worker w-{i:04d}")
        store.clock_offset_s += 0.001
    first = viewer.get("/audit").text
    assert f"worker w-{total - 1:04d}" in first and "worker w-0004" not in first
    older = _older_link(first)
    assert older is not None
    second = viewer.get(older).text
    assert all(f"worker w-{i:04d}" in second for i in range(5))
    assert _older_link(second) is None and ">Newest<" in second
    assert viewer.get("/audit?cursor=not-a-cursor").status_code == 400
