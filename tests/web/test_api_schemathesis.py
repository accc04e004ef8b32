"""``/openapi.json`` matches the answers: schemathesis generates requests
from the document for every operation and checks each answer (no 5xx, no
schema-valid request refused, status codes, headers and bodies as
documented) against the app on SQLite, in process.

Five things are set by hand, each for a reason the document cannot carry:
``cursor``/``before`` of ``GET /api/jobs`` are opaque tokens a client only
passes back (a random string matching their pattern is refused as malformed;
paging has its own tests), every ``Idempotency-Key`` is fresh (a key reused
for a different body is refused by design), ``depends_on`` is dropped
from job bodies (ids of jobs that exist cannot be generated; dependencies
have their own tests), so are the times on enqueue (``run_at``,
``expires_at``, ``expires_in_s``: bounded by the server's clock, within a
year of it and after one another, rules the document states in prose; they
have their own tests), and a unique key is dropped from a job that also has
a flow option (a limit key, or a batch: refused with a 422 naming
``unique_key``, a rule across fields the document states in prose)."""

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
            batch = "jobs" in case.body
            for job in [case.body, case.body.get("callback"), *(case.body.get("jobs") or [])]:
                if isinstance(job, dict):
                    for field in ("depends_on", "run_at", "expires_at", "expires_in_s"):
                        job.pop(field, None)
                    flow = job.get("limit_key") is not None or job.get("on_parent_failure") is not None
                    if batch or flow:  # a unique job takes no flow option
                        job.pop("unique_key", None)
                        job.pop("unique_for", None)
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


def test_the_document_states_what_the_fuzzer_once_found_undocumented(tmp_path: Path) -> None:
    """The four places a fuzzer from the document found the server answering
    otherwise, the answers checked against the document by schemathesis
    (status codes and bodies as documented) and the document read:
    ``cursor`` with ``before`` (422, stated), the limits routes' queue name
    (``maxLength`` as the server's), a ``null`` body to ``POST /api/purge``
    (schema-valid, accepted; a ``0`` is not), and an Idempotency-Key reused
    for another request (422, stated)."""
    from schemathesis.specs.openapi.checks import (
        positive_data_acceptance,
        response_schema_conformance,
        status_code_conformance,
    )

    conformance = [response_schema_conformance, status_code_conformance]
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    migrate(url)
    app = create_app(
        {"STORE_URL": url, "API_TOKENS": "st-operator:operator:st", "SECRET_KEY": "k" * 32, "TESTING": True}
    )
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app, headers=TOKEN)
    doc = app.test_client().get("/openapi.json", headers=TOKEN).json
    try:
        # 1. cursor and before together: refused, and the document says so.
        jobs = schema["/api/jobs"]["GET"]
        both = jobs.Case(query={"cursor": "abc", "before": "abc"}, headers=TOKEN)
        answer = both.call()
        assert answer.status_code == 422 and answer.json()["error"]["field"] == "before"
        both.validate_response(answer, checks=conformance)
        assert "`cursor` and `before`" in doc["paths"]["/api/jobs"]["get"]["responses"]["422"]["description"]
        # 2. the limits routes' queue name: the document's maxLength is the server's.
        limits = schema["/api/queues/{queue}/limits"]["PUT"]
        param = next(
            p for p in doc["paths"]["/api/queues/{queue}/limits"]["put"]["parameters"] if p["in"] == "path"
        )
        longest = param["schema"]["maxLength"]
        fits = limits.Case(path_parameters={"queue": "q" * longest}, body={"concurrency": 2}, headers=TOKEN)
        fits.validate_response(fits.call(), checks=[*conformance, positive_data_acceptance])
        for queue in ("q" * (longest + 1), "a\x00b"):
            past = limits.Case(path_parameters={"queue": queue}, body={"concurrency": 2}, headers=TOKEN)
            answer = past.call()
            assert answer.status_code == 422 and answer.json()["error"]["field"] == "queue"
            past.validate_response(answer, checks=conformance)
        # 3. a null body to POST /api/purge is schema-valid and accepted; 0 is neither.
        answer = app.test_client().post(
            "/api/purge", data="null", content_type="application/json", headers=TOKEN
        )
        assert answer.status_code == 200, answer.json
        body_schema = doc["paths"]["/api/purge"]["post"]["requestBody"]["content"]["application/json"][
            "schema"
        ]
        assert {"type": "null"} in body_schema["anyOf"]
        zero = app.test_client().post("/api/purge", data="0", content_type="application/json", headers=TOKEN)
        assert zero.status_code == 422 and zero.json["error"]["field"] == "body"
        # 4. an Idempotency-Key reused for another request: 422, stated in the document.
        enqueue = schema["/api/jobs"]["POST"]
        key = {**TOKEN, "Idempotency-Key": "reused-1"}
        first = enqueue.Case(body={"name": "a"}, headers=key)
        first.validate_response(first.call(), checks=conformance)
        other = enqueue.Case(body={"name": "b"}, headers=key)
        answer = other.call()
        assert answer.status_code == 422 and answer.json()["error"]["field"] == "Idempotency-Key"
        other.validate_response(answer, checks=conformance)
        assert "Idempotency-Key" in doc["paths"]["/api/jobs"]["post"]["responses"]["422"]["description"]
    finally:
        app.extensions["leasehold"].close()
