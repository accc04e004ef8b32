"""``/openapi.json`` matches the answers: schemathesis generates requests
from the document for every operation and checks each answer (no 5xx, no
schema-valid request refused, status codes, headers and bodies as
documented) against the app on SQLite, in process.

Three things are set by hand, each for a reason the document cannot carry:
``cursor``/``before`` of ``GET /api/jobs`` are opaque tokens a client only
passes back (a random string matching their pattern is refused as malformed;
paging has its own tests), every ``Idempotency-Key`` is fresh (a key reused
for a different body is refused by design), and ``depends_on`` is dropped
from job bodies (ids of jobs that exist cannot be generated; dependencies
have their own tests)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings

from store.sql import migrate
from webapp import create_app

#: Examples per operation (about 15 s for the whole API on two cores).
EXAMPLES = 40
TOKEN = {"Authorization": "Bearer st-operator"}

pytestmark = pytest.mark.timeout(180)


def property_test(operation: schemathesis.APIOperation) -> Callable[[], None]:
    """A hypothesis test of one operation: generated requests, every check."""
    opaque_paging = operation.label == "GET /api/jobs"

    @given(case=operation.as_strategy())
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def check(case: schemathesis.Case) -> None:
        if opaque_paging and case.query:
            case.query.pop("cursor", None)
            case.query.pop("before", None)
        if case.headers and "Idempotency-Key" in case.headers:
            case.headers["Idempotency-Key"] = uuid.uuid4().hex
        if isinstance(case.body, dict):
            case.body.pop("depends_on", None)
            for job in [case.body.get("callback"), *(case.body.get("jobs") or [])]:
                if isinstance(job, dict):
                    job.pop("depends_on", None)
        case.call_and_validate(headers=TOKEN)

    return check


def test_every_schema_valid_request_is_answered_as_documented(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    migrate(url)
    app = create_app(
        {"STORE_URL": url, "API_TOKENS": "st-operator:operator:st", "SECRET_KEY": "k" * 32, "TESTING": True}
    )
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app, headers=TOKEN)
    failures: dict[str, str] = {}
    tested = 0
    try:
        for result in schema.get_all_operations():
            operation = result.ok()
            tested += 1
            try:
                property_test(operation)()
            except Exception as exc:  # every operation is tried; the failures are listed together
                failures[operation.label] = " | ".join(line for line in str(exc).splitlines() if line.strip())
    finally:
        app.extensions["leasehold"].close()
    assert tested >= 25
    assert failures == {}
