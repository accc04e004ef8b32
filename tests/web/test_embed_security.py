"""What an anonymous visitor gets under a host app's prefix, and ``/healthz``:
no session cookie made for nobody, the host's hook guarding ``/ops/healthz``
like every route under the prefix, and no store error text for anyone.
Nothing here depends on the store, so these tests run on SQLite only."""

from __future__ import annotations

import logging

import pytest
from flask import Flask, session

from tests.conftest import handle_fixture
from tests.web.host_app import create_host_app
from webapp import Leasehold, create_app

handle = handle_fixture(["sqlite"])


def _bare_host(handle, **options) -> Flask:
    """A host whose hook accepts ``?as=<name>`` (an operator) and sends no one
    to a login page of its own (``login_url`` None: 401)."""
    from flask import request

    app = Flask("bare_host")
    app.config["SECRET_KEY"] = "host-secret"

    def who() -> tuple[str, str] | None:
        name = request.args.get("as") or session.get("name")
        return ("operator", name) if name else None

    Leasehold(
        app,
        url_prefix="/ops",
        authorize=who,
        store=handle.store,
        config={"STORE_URL": handle.url, "API_TOKENS": "host-view:viewer:ci"},
        **options,
    )
    return app


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/ops/", 401),
        ("GET", "/ops/jobs?status=Failed", 401),
        ("GET", "/ops/jobs/00000000-0000-0000-0000-000000000000", 401),
        ("GET", "/ops/no-such-page", 404),
        ("POST", "/ops/jobs/bulk", 400),  # no CSRF token: refused before anything else
        ("GET", "/ops/login", 404),
    ],
)
def test_an_anonymous_request_under_the_prefix_makes_no_session(
    handle, method: str, path: str, status: int
) -> None:
    client = _bare_host(handle).test_client()
    response = client.open(path, method=method)
    assert response.status_code == status
    assert "Set-Cookie" not in response.headers
    assert "X-CSRFToken" not in response.text


def test_a_host_that_sends_visitors_to_its_login_makes_no_session_either(handle) -> None:
    client = create_host_app(handle.store, STORE_URL=handle.url).test_client()
    response = client.get("/ops/jobs")
    assert response.status_code == 302
    assert "Set-Cookie" not in response.headers


def test_a_user_the_hook_accepts_gets_the_csrf_token(handle) -> None:
    client = _bare_host(handle).test_client()
    page = client.get("/ops/?as=alice")
    assert page.status_code == 200
    assert "X-CSRFToken" in page.text and "Set-Cookie" in page.headers


def test_embedded_healthz_goes_through_the_hook(handle) -> None:
    client = _bare_host(handle).test_client()
    refused = client.get("/ops/healthz")
    assert refused.status_code == 401
    assert refused.json["error"]["code"] == 401
    assert client.get("/ops/healthz?as=alice").json == {"status": "ok"}
    with_token = client.get("/ops/healthz", headers={"Authorization": "Bearer host-view"})
    assert with_token.status_code == 200


def test_standalone_healthz_stays_anonymous(handle) -> None:
    app = create_app({"STORE_URL": handle.url, "TESTING": True})
    response = app.test_client().get("/healthz")
    assert response.status_code == 200 and response.json == {"status": "ok"}


def test_healthz_tells_an_outage_but_not_its_detail(caplog: pytest.LogCaptureFixture) -> None:
    app = create_app(
        {
            "STORE_URL": "postgresql+psycopg://leasehold_user@127.0.0.1:9/secretdb",
            "TESTING": True,
        }
    )
    with caplog.at_level(logging.WARNING):
        response = app.test_client().get("/healthz")
    assert response.status_code == 503
    assert response.json == {"status": "unavailable"}
    for detail in ("127.0.0.1", "9", "leasehold_user", "secretdb"):
        assert detail not in response.text
    assert any("healthz: store unavailable" in r.getMessage() for r in caplog.records)
