"""The console's jobs page: search by error text and payload field, the note
when a store stopped at its scan limit, and paging back (every store)."""

# ruff: noqa: F811 - the fixtures are imported from console_fixtures and requested by name
from __future__ import annotations

import re

import pytest

from store.base import JobStore
from store.search import SearchPage
from tests.web.console_fixtures import (  # noqa: F401 - fixtures
    ConsoleClient,
    console_app,
    viewer,
)

ROW = r'<code title="([0-9a-f-]{36})"'


def test_search_by_payload_and_error(viewer: ConsoleClient, store: JobStore) -> None:
    ann = store.enqueue("t", {"user": "ann"})
    store.enqueue("t", {"user": "bob"})
    html = viewer.get("/jobs?payload=user%3Dann").text
    assert set(re.findall(ROW, html)) == {ann.id}
    assert 'name="payload" value="user=ann"' in html
    assert "Searched the newest" not in html
    assert "must be key=value" in viewer.get("/jobs?payload=nothing").text
    bad = store.enqueue("t", max_retries=0)
    [claimed] = [j for j in store.claim("w", ["default"], 10) if j.id == bad.id]
    store.fail(bad.id, claimed.lease_token, {"type": "OSError", "message": "Disk full", "traceback": None})
    assert set(re.findall(ROW, viewer.get("/jobs?error=disk").text)) == {bad.id}


def test_an_incomplete_search_says_how_far_it_went(
    viewer: ConsoleClient, store: JobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(type(store), "search_jobs", lambda self, **kw: SearchPage([], False, 10_000))
    html = viewer.get("/jobs?payload=k%3D1").text
    assert "Searched the newest 10,000 jobs" in html


def test_previous_page_link_returns_the_page_before(viewer: ConsoleClient, store: JobStore) -> None:
    for _ in range(6):
        store.enqueue("t")
        store.clock_offset_s += 1
    page1 = viewer.get("/jobs?limit=25").text
    store.enqueue_many([("t", None)] * 30)
    page1 = viewer.get("/jobs?limit=25").text
    assert 'rel="prev"' not in page1
    next_link = re.search(r'href="(/jobs\?[^"]*cursor=[^"]+)"', page1)
    assert next_link
    page2 = viewer.get(next_link.group(1).replace("&amp;", "&")).text
    prev_link = re.search(r'rel="prev" href="([^"]+)"', page2)
    assert prev_link
    back = viewer.get(prev_link.group(1).replace("&amp;", "&")).text
    assert re.findall(ROW, back) == re.findall(ROW, page1)
