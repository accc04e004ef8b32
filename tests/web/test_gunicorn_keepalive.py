"""A refused request never leaves a client's pooled connection unusable
(real gunicorn, real sockets): after a 413, a 400 or a 401 whose body the
app did not need, the next 10 requests on the same ``http.client``
connection (what every pooling client reuses) all succeed. Either the
server read what was left of the body, or it said ``Connection: close`` and
the client opened a new connection; never ``keep-alive`` and a reset."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.sql import migrate
from tests.web.gunicorn_proc import OPERATOR_TOKEN, Gunicorn

pytestmark = pytest.mark.slow

#: Past gunicorn's own drain of an unread body (64 KiB) and under the app's 1 MiB limit.
UNDER_LIMIT = b'{"name": "x", "payload": "' + b"a" * 600_000 + b'"}'
OVER_LIMIT = b"x" * (2 * 1024 * 1024)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gunicorn]:
    path = tmp_path_factory.mktemp("keepalive")
    url = f"sqlite:///{path / 'jobs.db'}"
    migrate(url)
    with Gunicorn(url, path / "gunicorn.log", workers=1, threads=2, access_log=False) as served:
        yield served


@pytest.mark.parametrize(
    ("what", "body", "headers", "status"),
    [
        ("413", OVER_LIMIT, {"Authorization": f"Bearer {OPERATOR_TOKEN}"}, 413),
        ("400", UNDER_LIMIT[:-5] + b"\x01 not json", {"Authorization": f"Bearer {OPERATOR_TOKEN}"}, 400),
        ("401", UNDER_LIMIT, {}, 401),
        (
            "415",
            UNDER_LIMIT,
            {"Authorization": f"Bearer {OPERATOR_TOKEN}", "Content-Type": "text/plain"},
            415,
        ),
    ],
)
def test_ten_requests_after_a_refusal_on_one_pooled_connection(
    server: Gunicorn, what: str, body: bytes, headers: dict[str, str], status: int
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        sent = {"Content-Type": "application/json", **headers}
        conn.request("POST", "/api/jobs", body=body, headers=sent)
        refused = conn.getresponse()
        refused.read()
        assert refused.status == status, what
        answered = []
        for _ in range(10):
            try:
                conn.request("GET", "/healthz")
                response = conn.getresponse()
                answered.append((response.status, json.loads(response.read())["status"]))
            except (ConnectionError, http.client.HTTPException, OSError) as exc:
                answered.append((0, type(exc).__name__))
        assert answered == [(200, "ok")] * 10, (what, refused.getheader("Connection"), answered)
    finally:
        conn.close()


def test_a_body_within_the_limit_still_keeps_the_connection(server: Gunicorn, tmp_path: Path) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        headers = {"Authorization": f"Bearer {OPERATOR_TOKEN}", "Content-Type": "application/json"}
        for _ in range(3):
            conn.request("POST", "/api/jobs", body=UNDER_LIMIT, headers=headers)
            response = conn.getresponse()
            response.read()
            assert response.status == 202 and response.getheader("Connection") == "keep-alive"
    finally:
        conn.close()
