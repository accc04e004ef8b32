"""Fixtures of the console tests: an app on the test's store, logged-in clients.

Imported by the console test modules (``from tests.web.console_fixtures import ...``)
so they do not depend on, or collide with, a ``tests/web/conftest.py``.
CSRF protection stays on: clients read the token from the pages like a browser.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.security import generate_password_hash
from werkzeug.test import TestResponse

from tests.backends import StoreHandle
from webapp import create_app

#: Test passwords are hashed with few iterations (hashing cost is not under test).
PASSWORD = "correct horse battery staple"
FAST_HASH = generate_password_hash(PASSWORD, method="pbkdf2:sha256:1000")
USERS = f"ann:{FAST_HASH}:operator,vic:{FAST_HASH}:viewer"
HX = {"HX-Request": "true"}
_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


def console_app_for(handle: StoreHandle, **overrides: Any) -> Flask:
    """The web app on ``handle``'s store (the same handle, so clock moves apply)."""
    app = create_app(
        {
            "STORE_URL": handle.url,
            "TESTING": True,
            "SECRET_KEY": "console-tests-secret-0123456789abcdef0123456789",
            "USERS": USERS,
            "LEASE_TTL": handle.store.settings.lease_ttl_s,
            **overrides,
        },
        store=handle.store,
    )
    return app


class ConsoleClient:
    """A test client that logs in and sends the CSRF token like the console's pages do."""

    def __init__(self, client: FlaskClient) -> None:
        self.client = client
        self.token: str | None = None

    def login(self, name: str, password: str = PASSWORD) -> TestResponse:
        page = self.client.get("/login")
        response = self.client.post(
            "/login", data={"username": name, "password": password, "csrf_token": self.csrf(page.text)}
        )
        self.token = None
        return response

    @staticmethod
    def csrf(html: str) -> str:
        match = _TOKEN.search(html)
        assert match, "page has no csrf_token field"
        return match.group(1)

    def token_for(self) -> str:
        if self.token is None:
            self.token = self.csrf(self.client.get("/jobs").text)
        return self.token

    def get(self, path: str, htmx: bool = False, **kwargs: Any) -> TestResponse:
        return self.client.get(path, headers=HX if htmx else None, **kwargs)

    def post(
        self, path: str, data: dict[str, str] | None = None, htmx: bool = False, csrf: bool = True
    ) -> TestResponse:
        headers = dict(HX) if htmx else {}
        form = dict(data or {})
        if csrf and htmx:
            headers["X-CSRFToken"] = self.token_for()
        elif csrf:
            form["csrf_token"] = self.token_for()
        return self.client.post(path, data=form, headers=headers)


def confirm_form(preview_html: str, form: dict[str, str]) -> dict[str, str]:
    """The confirmation a browser posts after a bulk preview: the form with
    the previewed count and the operation id the panel carries."""
    expected = re.search(r'name="expected" value="(\d+)"', preview_html)
    operation_id = re.search(r'name="operation_id" value="([^"]+)"', preview_html)
    assert expected and operation_id, "the preview has no confirmation form"
    return {**form, "confirm": "1", "expected": expected.group(1), "operation_id": operation_id.group(1)}


@pytest.fixture
def console_app(handle: StoreHandle) -> Iterator[Flask]:
    yield console_app_for(handle)


@pytest.fixture
def console_client(console_app: Flask) -> ConsoleClient:
    """Not logged in."""
    return ConsoleClient(console_app.test_client())


@pytest.fixture
def operator(console_app: Flask) -> ConsoleClient:
    client = ConsoleClient(console_app.test_client())
    assert client.login("ann").status_code == 303
    return client


@pytest.fixture
def viewer(console_app: Flask) -> ConsoleClient:
    client = ConsoleClient(console_app.test_client())
    assert client.login("vic").status_code == 303
    return client
