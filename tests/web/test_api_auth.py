"""API authentication: deny by default, viewers read, operators act."""

from __future__ import annotations

import hmac
import uuid

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.routing import Rule

from tests.backends import StoreHandle
from tests.web.conftest import OPERATOR, VIEWER, api_app_for
from webapp.api import async_endpoint
from webapp.api.auth import Role, find_token, parse_api_tokens
from webapp.config import ConfigError

READ = {"GET", "HEAD"}
#: Endpoints outside the API's responsibility (the console owns its login and pages).
NOT_OURS = ("console.", "static")
ANONYMOUS = {"api.healthz"}


def url_for_rule(rule: Rule) -> str:
    """A concrete URL for ``rule`` with made-up arguments."""
    values = {}
    for arg in rule.arguments:
        converter = rule._converters[arg].__class__.__name__
        values[arg] = {"UUIDConverter": uuid.uuid4(), "IntegerConverter": 1, "FloatConverter": 1.0}.get(
            converter, "x"
        )
    return rule.build(values, append_unknown=False)[1]


def api_rules(app: Flask) -> list[tuple[Rule, str]]:
    """Every (rule, method) the API must protect."""
    out = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint.startswith(NOT_OURS) or rule.endpoint in ANONYMOUS:
            continue
        out += [(rule, method) for method in sorted(rule.methods - {"HEAD", "OPTIONS"})]
    return out


@pytest.fixture
def app_with_async(handle: StoreHandle) -> Flask:
    app = api_app_for(handle)
    async_endpoint(app, "/orders/<int:order_id>/invoice", "make-invoice")
    return app


# ------------------------------------------------------------------ config
def test_tokens_parse_with_roles_and_names() -> None:
    tokens = parse_api_tokens(" a-token:viewer , b-token:operator:bob ,")
    assert [(t.role, t.name) for t in tokens] == [(Role.viewer, None), (Role.operator, "bob")]
    assert tokens[0].actor == "operator:viewer"
    assert tokens[1].actor == "operator:bob"
    assert parse_api_tokens("") == ()
    assert parse_api_tokens(None) == ()


@pytest.mark.parametrize(
    "raw",
    [
        "tok",
        "tok:admin",
        ":viewer",
        "tok:viewer:bad name",
        "a:viewer:x:y",
        "t:viewer,t:operator",
        "t k:viewer",
    ],
)
def test_bad_tokens_are_a_config_error_naming_the_variable(raw: str) -> None:
    with pytest.raises(ConfigError, match="LEASEHOLD_API_TOKENS") as info:
        parse_api_tokens(raw)
    assert "tok" not in str(info.value).replace("token", "")  # the secret itself is never echoed


def test_create_app_refuses_bad_tokens(handle: StoreHandle) -> None:
    with pytest.raises(ConfigError, match="LEASEHOLD_API_TOKENS"):
        api_app_for(handle, API_TOKENS="secret:superuser")


def test_every_configured_token_is_compared(monkeypatch: pytest.MonkeyPatch) -> None:
    tokens = parse_api_tokens("t1:viewer,t2:operator,t3:viewer")
    calls = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append(1)
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    assert find_token("t1", tokens) is tokens[0]  # found first, all three still compared
    assert len(calls) == 3
    assert find_token("t", tokens) is None
    assert find_token("t1 ", tokens) is None


# -------------------------------------------------------------- deny by default
def test_every_route_but_healthz_refuses_anonymous_requests(app_with_async: Flask) -> None:
    client = app_with_async.test_client()
    rules = api_rules(app_with_async)
    endpoints = {rule.endpoint for rule, _ in rules}
    assert {"api.enqueue_job", "api.prometheus_metrics", "api.openapi", "async_make_invoice"} <= endpoints
    for rule, method in rules:
        response = client.open(url_for_rule(rule), method=method)
        assert response.status_code == 401, (rule.rule, method, response.status_code)
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
        assert response.json["error"]["code"] == 401


def test_healthz_is_anonymous(api_client: FlaskClient) -> None:
    response = api_client.get("/healthz")
    assert response.status_code == 200
    assert response.json == {"status": "ok"}


@pytest.mark.parametrize(
    ("header", "error"),
    [
        ("Bearer wrong-token", "invalid_token"),
        ("Bearer ", "invalid_request"),
        ("Basic b3AtdG9rZW46", "invalid_request"),
        ("op-token", "invalid_request"),
        ("Bearer op-token-but-longer", "invalid_token"),
    ],
)
def test_bad_credentials_are_401(api_client: FlaskClient, header: str, error: str) -> None:
    response = api_client.get("/api/stats", headers={"Authorization": header})
    assert response.status_code == 401
    assert f'error="{error}"' in response.headers["WWW-Authenticate"]


def test_scheme_is_case_insensitive(api_client: FlaskClient) -> None:
    assert api_client.get("/api/stats", headers={"Authorization": "bearer view-token"}).status_code == 200


def test_no_tokens_configured_refuses_everything(handle: StoreHandle) -> None:
    client = api_app_for(handle, API_TOKENS="").test_client()
    assert client.get("/api/stats", headers=VIEWER).status_code == 401
    assert client.get("/healthz").status_code == 200


# ------------------------------------------------------------------ matrix
def test_auth_matrix_viewer_reads_operator_acts(app_with_async: Flask) -> None:
    """Every protected (route, method) with a viewer and an operator token:
    viewers are refused (403) on every mutating route and allowed on reads;
    operators are never refused."""
    client = app_with_async.test_client()
    for rule, method in api_rules(app_with_async):
        url = url_for_rule(rule)
        as_viewer = client.open(url, method=method, headers=VIEWER)
        as_operator = client.open(url, method=method, headers=OPERATOR)
        if method in READ:
            assert as_viewer.status_code not in (401, 403), (rule.rule, method, as_viewer.json)
        else:
            assert as_viewer.status_code == 403, (rule.rule, method, as_viewer.status_code)
            assert as_viewer.json["error"]["code"] == 403
        assert as_operator.status_code not in (401, 403), (rule.rule, method, as_operator.json)
        assert as_operator.status_code < 500, (rule.rule, method, as_operator.data[:300])


def test_viewer_refusal_changes_nothing(api_client: FlaskClient, handle: StoreHandle) -> None:
    job_id = api_client.post("/api/jobs", json={"name": "x"}, headers=OPERATOR).json["id"]
    assert api_client.post(f"/api/jobs/{job_id}/cancel", headers=VIEWER).status_code == 403
    assert api_client.post("/api/jobs", json={"name": "y"}, headers=VIEWER).status_code == 403
    assert handle.store.get(job_id).status.name == "Queued"
    assert sum(handle.store.counts().by_status.values()) == 1


def test_console_session_does_not_authenticate_the_api(handle: StoreHandle) -> None:
    from tests.web.console_fixtures import USERS, ConsoleClient

    app = api_app_for(handle, USERS=USERS)
    console = ConsoleClient(app.test_client())
    console.login("ann")
    assert console.client.get("/api/stats").status_code == 401
    assert console.client.post("/api/jobs", json={"name": "x"}).status_code == 401
