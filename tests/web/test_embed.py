"""The console and API mounted at /ops in a host app (tests/web/host_app.py):
the host keeps its routes, headers, session, templates and filters; /ops asks
the host's login and maps its roles."""

from __future__ import annotations

import re

import pytest
from flask import Flask
from flask.testing import FlaskClient

from store.lifecycle import JobStatus
from tests.backends import StoreHandle
from tests.web.host_app import HOST_CSP, HOST_HEADER, create_host_app
from webapp import Leasehold
from webapp.console.security import CSP

#: The CSRF token every console page carries for htmx (``<body hx-headers>``).
_TOKEN = re.compile(r'"X-CSRFToken": "([^"]+)"')


@pytest.fixture
def host(handle: StoreHandle) -> Flask:
    return create_host_app(handle.store, STORE_URL=handle.url, LEASE_TTL=handle.store.settings.lease_ttl_s)


def login(client: FlaskClient, name: str) -> None:
    response = client.post("/login", data={"name": name, "password": f"{name}-pw"})
    assert response.status_code == 303


def test_host_pages_keep_their_headers_session_templates_and_filters(host: Flask) -> None:
    client = host.test_client()
    login(client, "alice")
    page = client.get("/")
    assert page.headers["Content-Security-Policy"] == HOST_CSP
    assert page.headers[HOST_HEADER[0]] == HOST_HEADER[1]
    assert "Cache-Control" not in page.headers and "X-Frame-Options" not in page.headers
    assert '<p id="who">alice</p>' in page.text
    assert "5 seconds (host)" in page.text  # the host's filter, not the console's
    assert client.get("/ops/").status_code == 200
    again = client.get("/")
    assert '<p id="who">alice</p>' in again.text  # visiting /ops kept the host's session
    with client.session_transaction() as sess:
        assert sess["visits"] == 2 and sess["name"] == "alice"
    # The host's own 404 and its hooks are untouched by the API's envelope.
    missing = host.test_client().get("/nothing-here")
    assert missing.status_code == 404 and missing.headers[HOST_HEADER[0]] == "yes"
    assert not missing.is_json


def test_ops_needs_the_host_login(host: Flask) -> None:
    client = host.test_client()
    response = client.get("/ops/jobs?status=Queued")
    assert response.status_code == 302
    assert response.headers["Location"] == "/login?next=%2Fops%2Fjobs%3Fstatus%3DQueued"
    assert client.get("/ops/login").headers["Location"].startswith("/login")
    htmx = client.get("/ops/", headers={"HX-Request": "true", "HX-Current-URL": "http://localhost/ops/jobs"})
    assert htmx.status_code == 401 and htmx.headers["HX-Redirect"] == "/login?next=%2Fops%2Fjobs"
    login(client, "carol")  # a host user the hook gives no role
    assert client.get("/ops/").status_code == 302


def test_console_pages_are_the_consoles_under_the_prefix(host: Flask) -> None:
    client = host.test_client()
    login(client, "bob")
    page = client.get("/ops/")
    assert page.status_code == 200
    assert page.headers["Content-Security-Policy"] == CSP
    assert "Leasehold" in page.text and "Host app" not in page.text  # our base.html, not the host's
    assert 'href="/ops/static/console.css"' in page.text
    with client.get("/ops/static/console.css") as css:
        assert css.status_code == 200
    assert "bob" in page.text and "viewer" in page.text
    assert "Log out" not in page.text  # logging out is the host's


def test_roles_map_from_the_hook(host: Flask, handle: StoreHandle) -> None:
    job = handle.store.enqueue("demo.echo", {})
    viewer = host.test_client()
    login(viewer, "bob")
    token = _TOKEN.search(viewer.get(f"/ops/jobs/{job.id}").text)
    assert token is not None
    refused = viewer.post(f"/ops/jobs/{job.id}/cancel", data={"csrf_token": token.group(1)})
    assert refused.status_code == 403
    operator = host.test_client()
    login(operator, "alice")
    assert operator.post(f"/ops/jobs/{job.id}/cancel").status_code == 400  # no CSRF token
    token = _TOKEN.search(operator.get(f"/ops/jobs/{job.id}").text)
    assert token is not None
    done = operator.post(f"/ops/jobs/{job.id}/cancel", data={"csrf_token": token.group(1)})
    assert done.status_code == 303
    assert handle.store.get(job.id).status is JobStatus.Canceled
    events = handle.store.events(job.id)
    assert any(e.actor == "operator:alice" for e in events)


def test_api_is_mounted_under_the_prefix_with_bearer_tokens_only(host: Flask) -> None:
    client = host.test_client()
    login(client, "alice")  # the host's session is not an API credential
    assert client.get("/ops/api/jobs").status_code == 401
    ok = client.get("/ops/api/jobs", headers={"Authorization": "Bearer host-op"})
    assert ok.status_code == 200 and ok.is_json


def test_the_extension_sets_nothing_app_wide(handle: StoreHandle) -> None:
    app = Flask("bare")
    app.config["SECRET_KEY"] = "s"
    before = (app.session_interface, dict(app.before_request_funcs), dict(app.after_request_funcs))
    filters = set(app.jinja_env.filters)
    Leasehold(
        app, url_prefix="/ops", authorize=lambda: None, store=handle.store, config={"STORE_URL": handle.url}
    )
    assert app.session_interface is before[0]
    assert app.before_request_funcs.get(None, []) == before[1].get(None, [])
    assert app.after_request_funcs.get(None, []) == before[2].get(None, [])
    assert None not in app.error_handler_spec or not app.error_handler_spec[None]
    assert set(app.jinja_env.filters) == filters
    assert app.wsgi_app.__class__.__name__ != "ProxyFix"
    assert app.config.get("MAX_CONTENT_LENGTH") is None
