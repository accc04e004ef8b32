"""Login throttling that a client cannot dodge by choosing its address, and
what the app takes from a proxy's X-Forwarded-* headers (every store: the
failures are counted in the store)."""

from __future__ import annotations

import pytest
from flask import Flask, request

from tests.backends import StoreHandle
from tests.web.console_fixtures import PASSWORD, ConsoleClient, console_app_for
from webapp.config import ConfigError, load_web_settings
from webapp.console.auth import GLOBAL_THROTTLE_ATTEMPTS, THROTTLE_ATTEMPTS, USER_THROTTLE_ATTEMPTS

PROXY = {"REMOTE_ADDR": "10.0.0.1"}


class Attempts:
    """Login posts through one proxy, each claiming the address it likes."""

    def __init__(self, app: Flask) -> None:
        self.client = ConsoleClient(app.test_client())
        self.client.client.environ_base.update(PROXY)
        self.token = self.client.csrf(self.client.client.get("/login").text)

    def post(self, name: str, password: str, address: str):
        return self.client.client.post(
            "/login",
            data={"username": name, "password": password, "csrf_token": self.token},
            headers={"X-Forwarded-For": address},
        )


def test_rotating_forwarded_addresses_still_locks_the_user(handle: StoreHandle) -> None:
    # Two hops trusted but one proxy in front: the client's own X-Forwarded-For entry is taken.
    attempts = Attempts(console_app_for(handle, TRUSTED_PROXIES="2"))
    assert USER_THROTTLE_ATTEMPTS > THROTTLE_ATTEMPTS
    for n in range(USER_THROTTLE_ATTEMPTS):
        assert attempts.post("ann", "wrong", f"203.0.113.{n}, 10.0.0.2").status_code == 401, n
    refused = attempts.post("ann", "wrong", "198.51.100.1, 10.0.0.2")
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) > 0
    # The user is locked from everywhere, the right password too; another user is not.
    assert attempts.post("ann", PASSWORD, "198.51.100.2, 10.0.0.2").status_code == 429
    assert attempts.post("vic", PASSWORD, "198.51.100.3, 10.0.0.2").status_code == 303


def test_failed_logins_in_all_are_bounded(handle: StoreHandle) -> None:
    attempts = Attempts(console_app_for(handle, TRUSTED_PROXIES="1"))
    for n in range(GLOBAL_THROTTLE_ATTEMPTS):
        response = attempts.post(f"nobody-{n}", "wrong", f"203.0.{n // 250}.{n % 250}")
        assert response.status_code == 401, n
    refused = attempts.post("ann", PASSWORD, "198.51.100.9")
    assert refused.status_code == 429
    assert "Retry-After" in refused.headers


def test_a_success_clears_only_the_address_count(handle: StoreHandle) -> None:
    attempts = Attempts(console_app_for(handle, TRUSTED_PROXIES="1"))
    for n in range(USER_THROTTLE_ATTEMPTS - 1):
        assert attempts.post("ann", "wrong", f"203.0.113.{n}").status_code == 401
    assert (
        Attempts(console_app_for(handle, TRUSTED_PROXIES="1"))
        .post("ann", PASSWORD, "198.51.100.1")
        .status_code
        == 303
    )
    # The user's own count kept its failures: one more from anywhere locks it.
    assert attempts.post("ann", "wrong", "203.0.113.200").status_code == 401
    assert attempts.post("ann", "wrong", "203.0.113.201").status_code == 429


def _host_app(handle: StoreHandle, **overrides: str) -> Flask:
    app = console_app_for(handle, **overrides)
    app.add_url_rule("/_seen", "seen", lambda: f"{request.scheme} {request.host} {request.remote_addr}")
    return app


def test_forwarded_host_is_not_trusted_by_default(handle: StoreHandle) -> None:
    headers = {
        "X-Forwarded-For": "203.0.113.5",
        "X-Forwarded-Proto": "https",
        "X-Forwarded-Host": "evil.example",
    }
    client = _host_app(handle, TRUSTED_PROXIES="1").test_client()
    assert client.get("/_seen", headers=headers, environ_base=PROXY).text == "https localhost 203.0.113.5"
    trusting = _host_app(handle, TRUSTED_PROXIES="1", TRUST_FORWARDED_HOST="true").test_client()
    assert (
        trusting.get("/_seen", headers=headers, environ_base=PROXY).text == "https evil.example 203.0.113.5"
    )


def test_trust_forwarded_host_is_a_checked_flag() -> None:
    assert load_web_settings({}).trust_forwarded_host is False
    assert load_web_settings({"TRUST_FORWARDED_HOST": "1"}).trust_forwarded_host is True
    with pytest.raises(ConfigError, match=r"^LEASEHOLD_TRUST_FORWARDED_HOST "):
        load_web_settings({"TRUST_FORWARDED_HOST": "ture"})
