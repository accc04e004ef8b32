"""Where the console sends a visitor after login (``next``): a local path,
never another host, whatever characters a link smuggles in. The redirect
does not depend on the store, so these tests run on SQLite only."""

# ruff: noqa: F811 - the fixtures are imported from console_fixtures and requested by name
from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.conftest import handle_fixture
from tests.web.console_fixtures import (  # noqa: F401 - fixtures
    PASSWORD,
    ConsoleClient,
    console_app,
    console_client,
    operator,
)
from webapp.console.blueprint import safe_next

handle = handle_fixture(["sqlite"])

#: ``next`` values as sent in a query string (already percent-encoded).
ENCODED = [
    "/%09/evil.example",  # tab: browsers drop it, leaving //evil.example
    "/%0d/evil.example",  # CR
    "/%0a/evil.example",  # LF
    "/%0b/evil.example",  # vertical tab
    "/%0c/evil.example",  # form feed
    "/%00/evil.example",
    "/%20/evil.example",
    "%09//evil.example",
    "/%E3%80%80/evil.example",  # ideographic space
    "/%C2%85/evil.example",  # NEL (a C1 control)
    "/%5Cevil.example",  # /\evil.example
    "/%09%5Cevil.example",
    "%5C%5Cevil.example",
    "//evil.example",
    "/%2F/evil.example",
    "https://evil.example/",
    "https:evil.example",
    "javascript:alert(1)",
    "",
]
#: The same as the raw text a form posts.
RAW = [
    "/\t/evil.example",
    "/\r/evil.example",
    "/\n/evil.example",
    "/\x0b/evil.example",
    " //evil.example",
    "/\\evil.example",
    "/\t\\evil.example",
    "\\\\evil.example",
    "//evil.example",
    "http://evil.example",
]


@pytest.mark.parametrize("encoded", ENCODED)
def test_a_logged_in_visitor_is_never_sent_off_site(operator: ConsoleClient, encoded: str) -> None:
    response = operator.client.get(f"/login?next={encoded}")
    assert response.status_code == 302
    assert response.headers["Location"] == "/"


@pytest.mark.parametrize("target", RAW)
def test_a_login_never_redirects_off_site(console_client: ConsoleClient, target: str) -> None:
    page = console_client.client.get("/login")
    response = console_client.client.post(
        "/login",
        data={
            "username": "ann",
            "password": PASSWORD,
            "next": target,
            "csrf_token": console_client.csrf(page.text),
        },
    )
    assert response.status_code == 303
    assert response.headers["Location"] == "/"


def test_a_carriage_return_in_next_is_no_server_error(console_client: ConsoleClient) -> None:
    page = console_client.client.get("/login?next=/%0d/x")
    assert page.status_code == 200
    assert 'name="next" value="/"' in page.text


@pytest.mark.parametrize(
    "target", ["/jobs?status=Failed&queue=mail", "/jobs/0190a0b0-0000-7000-8000-000000000001", "/audit"]
)
def test_local_paths_are_kept(operator: ConsoleClient, target: str) -> None:
    response = operator.client.get(f"/login?next={quote(target, safe='')}")
    assert response.headers["Location"] == target


def test_safe_next_drops_control_characters_from_a_local_path(console_app) -> None:
    with console_app.test_request_context("/"):
        assert safe_next("/jobs\t?status=Failed") == "/jobs?status=Failed"
        assert safe_next("/\t/evil.example") == "/"
        assert safe_next(None) == "/"
