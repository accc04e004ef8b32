"""Console pages of flow control through the Flask client: the queue's
limits form (operators only, CSRF, audited, bad values named), "why isn't
it running?" for a held or waiting job, the batch page and its cancel."""

# ruff: noqa: F811 - the fixtures are imported from console_fixtures and requested by name
from __future__ import annotations

from store.base import JobStore
from store.flow_rules import QueueLimits, Rate
from store.lifecycle import EventKind
from store.models import JobSpec
from tests.conftest import handle_fixture
from tests.web.console_fixtures import (  # noqa: F401 - fixtures
    ConsoleClient,
    console_app,
    operator,
    viewer,
)

handle = handle_fixture(["sqlite", "postgresql", "redis"])


def test_an_operator_sets_and_clears_limits_from_the_queue_page(
    operator: ConsoleClient, store: JobStore
) -> None:
    assert 'id="limits-form"' in operator.get("/queues/mail").text
    done = operator.post("/queues/mail/limits", {"concurrency": "2", "rate": "10/1", "per_key_rate": ""})
    assert done.status_code == 303
    assert store.queue_limits() == {"mail": QueueLimits(concurrency=2, rate=Rate(10, 1.0))}
    entry = store.audit(1)[0]
    assert (entry.kind, entry.actor) == (EventKind.QUEUE_LIMITS_SET, "operator:ann")
    page = operator.get("/queues/mail").text
    assert "Limits of mail set by ann." in page and 'id="limit-concurrency"' in page
    htmx = operator.post("/queues/mail/limits", {"concurrency": ""}, htmx=True)
    assert htmx.status_code == 204 and htmx.headers["HX-Redirect"].endswith("/queues/mail")
    assert store.queue_limits() == {}


def test_bad_limits_are_refused_naming_the_field(operator: ConsoleClient, store: JobStore) -> None:
    operator.post("/queues/mail/limits", {"per_key_rate": "often"})
    assert "per_key_rate" in operator.get("/queues/mail").text
    assert store.queue_limits() == {}


def test_limits_need_an_operator_and_csrf(
    operator: ConsoleClient, viewer: ConsoleClient, store: JobStore
) -> None:
    assert 'id="limits-form"' not in viewer.get("/queues/mail").text
    assert viewer.post("/queues/mail/limits", {"concurrency": "1"}).status_code == 403
    assert operator.post("/queues/mail/limits", {"concurrency": "1"}, csrf=False).status_code == 400
    assert store.queue_limits() == {}


def test_why_a_job_waits_names_the_limit_or_its_parents(operator: ConsoleClient, store: JobStore) -> None:
    store.set_queue_limits("mail", QueueLimits(concurrency=1))
    first = store.enqueue("t", None, queue="mail")
    second = store.enqueue("t", None, queue="mail")
    store.claim("w", ["mail"], 5)
    html = operator.get(f"/jobs/{second.id}").text
    assert "concurrency limit 1: 1 running" in html
    child = store.enqueue("t", None, depends_on=[first.id, second.id])
    html = operator.get(f"/jobs/{child.id}").text
    assert "Waiting for 2 parent job(s)" in html and 'id="job-parents"' in html
    assert f"/jobs/{child.id}" in operator.get(f"/jobs/{first.id}").text  # listed as its child


def test_batch_page_shows_progress_and_cancels(
    operator: ConsoleClient, viewer: ConsoleClient, store: JobStore
) -> None:
    batch = store.create_batch([JobSpec("t", {"i": i}) for i in range(3)], JobSpec("cb", None))
    page = operator.get(f"/batches/{batch.id}")
    assert page.status_code == 200 and "0 of 3 finished" in page.text and "hx-trigger" in page.text
    assert 'id="batch-cancel"' not in viewer.get(f"/batches/{batch.id}").text
    assert viewer.post(f"/batches/{batch.id}/cancel").status_code == 403
    fragment = operator.post(f"/batches/{batch.id}/cancel", htmx=True)
    assert fragment.status_code == 200 and "Batch canceled by ann." in fragment.text
    assert store.get_batch(batch.id).counts == {"Canceled": 3}
    assert operator.get("/batches/not-a-batch").status_code == 404
