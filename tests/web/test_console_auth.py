"""Console log-in, sessions, roles and protections (Flask test client, every store)."""

# ruff: noqa: F811 - the fixtures are imported from console_fixtures and requested by name
from __future__ import annotations

import pytest
from flask import Flask

from tests.backends import StoreHandle
from tests.web.console_fixtures import (  # noqa: F401 - fixtures
    FAST_HASH,
    ConsoleClient,
    console_app,
    console_app_for,
    console_client,
    operator,
    viewer,
)
from webapp import create_app
from webapp.config import ConfigError
from webapp.console.auth import THROTTLE_ATTEMPTS

PAGES = ["/", "/jobs", "/jobs/00000000-0000-0000-0000-000000000000", "/workers", "/recovery", "/audit"]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_needs_a_login(console_client: ConsoleClient, path: str) -> None:
    response = console_client.get(path)
    assert response.status_code == 302
    assert response.headers["Location"].startswith("/login?next=")


def test_htmx_requests_get_401_with_a_redirect_to_login(console_client: ConsoleClient) -> None:
    response = console_client.client.get(
        "/jobs", headers={"HX-Request": "true", "HX-Current-URL": "http://localhost/jobs?status=Failed"}
    )
    assert response.status_code == 401
    assert response.headers["HX-Redirect"] == "/login?next=/jobs?status%3DFailed"


def test_login_then_back_to_the_page_asked_for(console_client: ConsoleClient) -> None:
    page = console_client.client.get("/login?next=/workers")
    response = console_client.client.post(
        "/login",
        data={
            "username": "ann",
            "password": "correct horse battery staple",
            "next": "/workers",
            "csrf_token": console_client.csrf(page.text),
        },
    )
    assert response.status_code == 303
    assert response.headers["Location"] == "/workers"
    assert console_client.get("/workers").status_code == 200


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example/", "/\\evil.example"])
def test_login_never_redirects_off_site(console_client: ConsoleClient, target: str) -> None:
    page = console_client.client.get("/login")
    response = console_client.client.post(
        "/login",
        data={
            "username": "ann",
            "password": "correct horse battery staple",
            "next": target,
            "csrf_token": console_client.csrf(page.text),
        },
    )
    assert response.headers["Location"] == "/"


def test_wrong_password_and_unknown_user_are_refused_alike(console_client: ConsoleClient) -> None:
    wrong = console_client.login("ann", "nope")
    unknown = console_client.login("nobody", "nope")
    assert wrong.status_code == unknown.status_code == 401
    assert "Unknown user or wrong password" in wrong.text
    assert console_client.get("/").status_code == 302


def test_login_is_throttled_per_user_and_address(console_client: ConsoleClient) -> None:
    for _ in range(THROTTLE_ATTEMPTS):
        assert console_client.login("ann", "nope").status_code == 401
    refused = console_client.login("ann")  # even the right password, for now
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) > 0
    assert console_client.login("vic").status_code == 303  # another user is not locked out


def test_login_throttle_holds_across_processes(handle: StoreHandle) -> None:
    """Two apps on one store (two gunicorn workers) share one allowance."""
    first = ConsoleClient(console_app_for(handle).test_client())
    second = ConsoleClient(console_app_for(handle).test_client())
    for i in range(THROTTLE_ATTEMPTS):
        client = first if i % 2 else second
        assert client.login("ann", "nope").status_code == 401
    assert first.login("ann").status_code == 429
    assert second.login("ann").status_code == 429


def test_login_post_needs_csrf(console_client: ConsoleClient) -> None:
    response = console_client.client.post("/login", data={"username": "ann", "password": "x"})
    assert response.status_code == 400


def test_logout_ends_the_session(operator: ConsoleClient) -> None:
    assert operator.post("/logout").status_code == 303
    assert operator.get("/").status_code == 302


def test_logout_needs_a_post_with_csrf(operator: ConsoleClient) -> None:
    assert operator.get("/logout").status_code == 405
    assert operator.post("/logout", csrf=False).status_code == 400
    assert operator.get("/").status_code == 200


def test_session_cookie_flags(console_app: Flask) -> None:
    client = ConsoleClient(console_app.test_client())
    response = client.login("ann")
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=Lax" in cookie
    assert "Secure" not in cookie  # plain http in this test
    https = console_app.test_client()
    page = https.get("/login", base_url="https://localhost")
    response = https.post(
        "/login",
        base_url="https://localhost",
        headers={"Referer": "https://localhost/login"},
        data={
            "username": "ann",
            "password": "correct horse battery staple",
            "csrf_token": ConsoleClient.csrf(page.text),
        },
    )
    assert response.status_code == 303
    assert "Secure" in response.headers["Set-Cookie"]


def test_secure_cookies_setting_forces_secure(handle: StoreHandle) -> None:
    app = console_app_for(handle, SECURE_COOKIES=True)
    client = ConsoleClient(app.test_client())
    assert "Secure" in client.login("ann").headers["Set-Cookie"]


def test_removed_user_and_changed_password_end_sessions(handle: StoreHandle) -> None:
    app = console_app_for(handle)
    client = ConsoleClient(app.test_client())
    client.login("ann")
    assert client.get("/").status_code == 200
    from webapp.console.auth import parse_users

    other_hash = FAST_HASH.replace("$", "$x", 1)  # a different hash for the same name
    app.extensions["leasehold.console.users"] = parse_users(f"ann:{other_hash}:operator")
    assert client.get("/").status_code == 302
    app.extensions["leasehold.console.users"] = parse_users("")
    assert client.get("/").status_code == 302


def test_authenticated_pages_are_not_cached_and_carry_a_strict_csp(operator: ConsoleClient) -> None:
    response = operator.get("/")
    assert response.headers["Cache-Control"] == "no-store"
    csp = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "style-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe" not in csp
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Frame-Options"] == "DENY"


def test_pages_have_no_inline_script_or_style(operator: ConsoleClient, store) -> None:
    job = store.enqueue("t", {"a": 1})
    for path in [*PAGES[:2], f"/jobs/{job.id}", *PAGES[3:]]:
        html = operator.get(path).text
        assert "<script>" not in html and "<style" not in html and " style=" not in html
        assert " on" + "click=" not in html
        assert "<script src=" in html


def test_secret_key_is_required_outside_tests(handle: StoreHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEASEHOLD_SECRET_KEY", raising=False)
    with pytest.raises(ConfigError, match="LEASEHOLD_SECRET_KEY"):
        create_app({"STORE_URL": handle.url})


@pytest.mark.parametrize(
    ("users", "message"),
    [
        ("ann:operator", "name:password-hash:role"),
        (f"ann:{FAST_HASH}:admin", "role 'admin'"),
        (f"ann:{FAST_HASH}:viewer,ann:{FAST_HASH}:viewer", "repeats"),
    ],
)
def test_bad_users_setting_is_refused_at_start(handle: StoreHandle, users: str, message: str) -> None:
    with pytest.raises(ConfigError, match="LEASEHOLD_USERS") as info:
        console_app_for(handle, USERS=users)
    assert message in str(info.value)
    assert FAST_HASH not in str(info.value)
