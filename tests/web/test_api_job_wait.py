"""``GET /api/jobs/<id>?wait=S``: answers once the job is finished or S has
passed (then with Retry-After), reading the store about once a second, and
refuses a wait outside 0..30 s naming the field."""

from __future__ import annotations

import itertools
import threading
import time

from flask.testing import FlaskClient

from store.base import JobStore
from tests.web.conftest import VIEWER


def test_answers_when_the_job_finishes(api_client: FlaskClient, store: JobStore) -> None:
    job = store.enqueue("t", {})

    def finish() -> None:
        [claimed] = store.claim("w-1", ["default"])
        store.complete(claimed.id, claimed.lease_token, {"ok": 1})

    timer = threading.Timer(0.3, finish)
    timer.start()
    t0 = time.monotonic()
    answer = api_client.get(f"/api/jobs/{job.id}?wait=10", headers=VIEWER)
    took = time.monotonic() - t0
    timer.join()
    assert (
        answer.status_code == 200
        and answer.json["status"] == "Completed"
        and answer.json["result"] == {"ok": 1}
    )
    assert "Retry-After" not in answer.headers
    assert 0.3 <= took < 3.0  # at the first read after it finished (one a second), not at 10 s


def test_still_running_after_the_wait_reads_about_once_a_second(
    api_client: FlaskClient, store: JobStore
) -> None:
    job = store.enqueue("t", {})
    reads: list[float] = []
    real_get = store.get

    def counted(job_id: str):
        reads.append(time.monotonic())
        return real_get(job_id)

    store.get = counted  # type: ignore[method-assign] - this test's instance only
    try:
        t0 = time.monotonic()
        answer = api_client.get(f"/api/jobs/{job.id}?wait=2", headers=VIEWER)
        took = time.monotonic() - t0
    finally:
        del store.get
    assert answer.status_code == 200 and answer.json["status"] == "Queued"
    assert answer.headers["Retry-After"] == "1" and 2.0 <= took < 4.0
    waits = [b - a for a, b in itertools.pairwise(reads)]
    assert 2 <= len(reads) <= 4 and all(w >= 0.9 for w in waits[:-1])


def test_a_wait_out_of_range_is_422_and_none_is_immediate(api_client: FlaskClient, store: JobStore) -> None:
    job = store.enqueue("t", {})
    for bad in ("31", "-1", "soon", "nan"):
        answer = api_client.get(f"/api/jobs/{job.id}?wait={bad}", headers=VIEWER)
        assert answer.status_code == 422 and "wait" in answer.json["error"]["message"]
    t0 = time.monotonic()
    assert api_client.get(f"/api/jobs/{job.id}", headers=VIEWER).json["status"] == "Queued"
    assert api_client.get(f"/api/jobs/{job.id}?wait=0", headers=VIEWER).status_code == 200
    assert time.monotonic() - t0 < 1.0
    missing = "0190c0de-0000-7000-8000-000000000000"
    assert api_client.get(f"/api/jobs/{missing}?wait=5", headers=VIEWER).status_code == 404
