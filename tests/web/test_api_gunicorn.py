"""The API under ``gunicorn -w 4`` (real processes) on each store."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from store import StoreSettings
from tests.backends import StoreHandle
from tests.conftest import make_handle
from tests.web.gunicorn_proc import VIEWER_TOKEN, Gunicorn

pytestmark = pytest.mark.slow


@pytest.fixture(params=["postgresql", "redis", "sqlite"])
def served_handle(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreHandle]:
    if request.param == "redis" and importlib.util.find_spec("store.redis.store") is None:
        pytest.skip("store.redis is not importable yet")
    handle = make_handle(request.param, request, tmp_path, StoreSettings())
    yield handle
    handle.close()


def test_api_answers_under_gunicorn_with_four_workers(served_handle: StoreHandle, tmp_path: Path) -> None:
    with Gunicorn(served_handle.url, tmp_path / "gunicorn.log", workers=4) as server:
        # Enough concurrent requests that several worker processes answer.
        with ThreadPoolExecutor(8) as pool:
            answers = list(
                pool.map(
                    lambda i: server.request("POST", "/api/jobs", {"name": "echo", "payload": {"i": i}}),
                    range(40),
                )
            )
        assert [status for status, _, _ in answers] == [202] * 40, server.log_tail()
        ids = {body["id"] for _, _, body in answers}
        assert len(ids) == 40
        status, _, job = server.request("GET", answers[0][1]["Location"], token=VIEWER_TOKEN)
        assert status == 200 and job["status"] == "Queued"
        status, _, page = server.request("GET", "/api/jobs?limit=500", token=VIEWER_TOKEN)
        assert status == 200 and {j["id"] for j in page["items"]} == ids
        status, _, stats = server.request("GET", "/api/stats", token=VIEWER_TOKEN)
        assert stats["counts"]["Queued"] == 40
        status, _, canceled = server.request("POST", f"/api/jobs/{job['id']}/cancel")
        assert status == 200 and canceled["status"] == "Canceled"
        assert server.request("POST", f"/api/jobs/{job['id']}/cancel")[0] == 409
        assert server.request("GET", "/api/stats", token=None)[0] == 401
        assert server.request("POST", "/api/jobs", {"name": "x"}, token=VIEWER_TOKEN)[0] == 403
        status, _, text = server.request("GET", "/metrics", token=VIEWER_TOKEN)
        assert status == 200 and "leasehold_jobs_enqueued_total 40.0" in text
        assert served_handle.store.counts().by_status["Queued"] == 39
    assert "Traceback" not in (tmp_path / "gunicorn.log").read_text(), (
        tmp_path / "gunicorn.log"
    ).read_text()[-3000:]
