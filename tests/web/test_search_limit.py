"""Job searches (part of an id, error text, payload) are limited per API token
and per console user, counted in the store so every process shares the
count (every store)."""

from __future__ import annotations

from tests.backends import StoreHandle
from tests.web.conftest import API_TOKENS, OPERATOR, VIEWER, api_app_for
from tests.web.console_fixtures import ConsoleClient, console_app_for
from webapp import create_app
from webapp.config import WEB_DEFAULTS
from webapp.search_limit import SEARCH_WINDOW_S

#: The default allowance (LEASEHOLD_SEARCH_LIMIT).
SEARCH_LIMIT = WEB_DEFAULTS["SEARCH_LIMIT"]

SEARCH = "/api/jobs?id=abc"


def test_api_searches_are_limited_per_token_across_processes(handle: StoreHandle) -> None:
    handle.store.enqueue("demo.echo", {"user": "ann"})
    first = api_app_for(handle).test_client()
    # Another app with its own connection to the store: another gunicorn worker.
    other = create_app({"STORE_URL": handle.url, "API_TOKENS": API_TOKENS, "TESTING": True})
    second = other.test_client()
    for n in range(SEARCH_LIMIT):
        client = first if n % 2 else second
        assert client.get(SEARCH, headers=VIEWER).status_code == 200, n
    refused = first.get("/api/jobs?payload=user=ann", headers=VIEWER)
    assert refused.status_code == 429
    assert refused.json["error"]["code"] == 429
    assert 1 <= int(refused.headers["Retry-After"]) <= SEARCH_WINDOW_S
    assert second.get("/api/jobs?error=boom", headers=VIEWER).status_code == 429
    # Listing is no search; another token has its own allowance.
    assert first.get("/api/jobs?status=Queued", headers=VIEWER).status_code == 200
    assert first.get(SEARCH, headers=OPERATOR).status_code == 200
    # A new window opens once the old one has closed.
    handle.store.clock_offset_s += SEARCH_WINDOW_S + 1
    assert first.get(SEARCH, headers=VIEWER).status_code == 200
    other.extensions["leasehold"].close()


def test_console_searches_are_limited_per_user(handle: StoreHandle) -> None:
    app = console_app_for(handle)
    vic, ann = ConsoleClient(app.test_client()), ConsoleClient(app.test_client())
    assert vic.login("vic").status_code == 303 and ann.login("ann").status_code == 303
    for n in range(SEARCH_LIMIT):
        assert vic.get(f"/jobs?error=boom-{n}").status_code == 200, n
    refused = vic.get("/jobs?id=abc", htmx=True)
    assert refused.status_code == 429
    assert "Too many searches" in refused.text
    assert int(refused.headers["Retry-After"]) >= 1
    assert vic.get("/jobs?status=Failed").status_code == 200  # a listing is no search
    assert ann.get("/jobs?id=abc").status_code == 200


def test_the_allowance_is_the_search_limit_setting(handle: StoreHandle) -> None:
    app = create_app(
        {"STORE_URL": handle.url, "API_TOKENS": API_TOKENS, "TESTING": True, "SEARCH_LIMIT": "3"}
    )
    client = app.test_client()
    assert [client.get(SEARCH, headers=VIEWER).status_code for _ in range(4)] == [200, 200, 200, 429]
    refused = client.get(SEARCH, headers=VIEWER)
    assert "at most 3 every" in refused.json["error"]["message"]
    app.extensions["leasehold"].close()
