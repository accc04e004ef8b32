"""The API over what a store can hold, on every store: a NUL in a search or
a filter is bad input (422 or nothing found), never an outage (503); a queue
name or an Idempotency-Key that validation lets through is stored (no 500),
one it refuses is a 422 naming it; a read cut by PostgreSQL's statement
timeout is a 503 saying so."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient
from sqlalchemy import create_engine, text
from werkzeug.security import generate_password_hash

from store import open_store
from store.base import JobStore
from store.spec import MAX_OPERATOR_NAME_LEN, MAX_QUEUE_LEN
from tests.backends import StoreHandle
from tests.web.conftest import OPERATOR, VIEWER, api_app_for
from webapp.config import ConfigError
from webapp.console.auth import parse_users


@pytest.mark.parametrize("query", ["error=x%00y", "id=ab%00", "payload=k%3Dx%00"])
def test_a_search_with_a_nul_is_a_422_naming_it(api_client: FlaskClient, store: JobStore, query: str) -> None:
    store.enqueue("t")
    response = api_client.get(f"/api/jobs?{query}", headers=VIEWER)
    assert response.status_code == 422, response.json
    assert response.json["error"]["message"].split(":")[0] in ("error", "id", "payload")


@pytest.mark.parametrize("query", ["queue=a%00b", "name=t%00"])
def test_a_listing_filter_with_a_nul_is_no_outage(
    api_client: FlaskClient, store: JobStore, query: str
) -> None:
    store.enqueue("t")
    response = api_client.get(f"/api/jobs?{query}", headers=VIEWER)
    assert response.status_code in (200, 422), response.json
    if response.status_code == 200:
        assert response.json["items"] == []


def test_pause_routes_take_the_longest_queue_name_and_refuse_longer(api_client: FlaskClient) -> None:
    longest = "q" * MAX_QUEUE_LEN
    paused = api_client.post(f"/api/queues/{longest}/pause", headers=OPERATOR)
    assert paused.status_code == 200 and paused.json["paused"] is True
    for change in ("pause", "resume"):
        response = api_client.post(f"/api/queues/{longest}q/{change}", headers=OPERATOR)
        assert response.status_code == 422, response.json
        assert response.json["error"]["message"].startswith("queue:")


def test_an_operation_id_of_a_hundred_characters_is_stored(api_client: FlaskClient) -> None:
    key = "k" * 100
    body = {"action": "cancel", "filter": {"queue": "nothing-here"}}
    created = api_client.post("/api/operations", json=body, headers={**OPERATOR, "Idempotency-Key": key})
    assert created.status_code == 202, created.json
    assert api_client.get(f"/api/operations/{key}", headers=VIEWER).json["id"] == key
    again = api_client.post("/api/operations", json=body, headers={**OPERATOR, "Idempotency-Key": key})
    assert again.status_code == 200


def test_a_statement_timeout_is_a_503_that_says_so(
    handle: StoreHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    if handle.backend != "postgresql":
        pytest.skip("PostgreSQL's statement timeout")
    monkeypatch.setenv("LEASEHOLD_PG_STATEMENT_TIMEOUT", "0.3")
    quick = open_store(handle.url, handle.store.settings)
    app = api_app_for(handle)
    app.extensions["leasehold"] = quick
    locker = create_engine(handle.url)
    try:
        with locker.begin() as conn:  # a migration holding the table: every read waits
            conn.execute(text("LOCK TABLE leasehold_jobs IN ACCESS EXCLUSIVE MODE"))
            response = app.test_client().get("/api/jobs?error=disk", headers=VIEWER)
        assert response.status_code == 503 and response.headers["Retry-After"]
        assert "LEASEHOLD_PG_STATEMENT_TIMEOUT" in response.json["error"]["message"]
        assert app.test_client().get("/api/jobs?error=disk", headers=VIEWER).status_code == 200
    finally:
        locker.dispose()
        quick.close()


def test_console_user_names_fit_the_actor_columns() -> None:
    digest = generate_password_hash("pw")
    assert parse_users(f"{'a' * MAX_OPERATOR_NAME_LEN}:{digest}:operator")
    with pytest.raises(ConfigError, match=f"longer than {MAX_OPERATOR_NAME_LEN}"):
        parse_users(f"{'a' * (MAX_OPERATOR_NAME_LEN + 1)}:{digest}:operator")
