"""Behind a proxy: LEASEHOLD_TRUSTED_PROXIES applies
ProxyFix, so login throttling is keyed by the client's address, not the proxy's."""

from __future__ import annotations

from flask import Flask

from tests.backends import StoreHandle
from tests.web.console_fixtures import PASSWORD, ConsoleClient, console_app_for
from webapp.console.auth import THROTTLE_ATTEMPTS

PROXY = {"REMOTE_ADDR": "10.0.0.1"}


def _attempt(app: Flask, client_address: str, password: str) -> int:
    client = ConsoleClient(app.test_client())
    client.client.environ_base.update(PROXY)
    page = client.client.get("/login")
    return client.client.post(
        "/login",
        data={"username": "ann", "password": password, "csrf_token": client.csrf(page.text)},
        headers={"X-Forwarded-For": client_address},
    ).status_code


def test_one_clients_failures_do_not_lock_out_another_behind_the_proxy(handle: StoreHandle) -> None:
    app = console_app_for(handle, TRUSTED_PROXIES="1")
    for _ in range(THROTTLE_ATTEMPTS):
        assert _attempt(app, "203.0.113.7", "wrong") == 401
    assert _attempt(app, "203.0.113.7", "wrong") == 429

    assert _attempt(app, "198.51.100.9", PASSWORD) == 303


def test_without_trusted_proxies_the_forwarded_address_is_ignored(handle: StoreHandle) -> None:
    app = console_app_for(handle)
    for n in range(THROTTLE_ATTEMPTS):
        assert _attempt(app, f"203.0.113.{n}", "wrong") == 401
    assert _attempt(app, "198.51.100.9", "wrong") == 429  # a client cannot pick its own address
