"""Fixtures of the API tests: an app on the test's store and a test client.

``api_app`` shares the test's store handle (``handle.store``), so moving the
store's clock in a test (``store.clock_offset_s``) applies to the app too.
Tokens: OPERATOR (``op-token``, named ``alice``), VIEWER (``view-token``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.backends import StoreHandle
from webapp import create_app

API_TOKENS = "op-token:operator:alice,view-token:viewer"
OPERATOR = {"Authorization": "Bearer op-token"}
VIEWER = {"Authorization": "Bearer view-token"}


def api_app_for(handle: StoreHandle, **overrides: Any) -> Flask:
    """The web app on ``handle``'s store object."""
    app = create_app(
        {
            "STORE_URL": handle.url,
            "API_TOKENS": API_TOKENS,
            "SECRET_KEY": "api-tests-secret-0123456789abcdef0123456789",
            "TESTING": True,
            **overrides,
        },
        store=handle.store,
    )
    return app


@pytest.fixture
def api_app(handle: StoreHandle) -> Flask:
    return api_app_for(handle)


@pytest.fixture
def api_client(api_app: Flask) -> Iterator[FlaskClient]:
    with api_app.test_client() as client:
        yield client
