"""Contract: search by part of an id, by error text and by a payload field,
with the listing filters, on every store; a store that stops at its scan limit
says so."""

from __future__ import annotations

import pytest

from store.base import JobStore
from store.errors import ValidationError
from store.lifecycle import JobStatus
from store.search import SearchPage
from tests.backends import StoreHandle
from tests.store.helpers import job_in

S = JobStatus


def _ids(page: SearchPage) -> set[str]:
    return {j.id for j in page.items}


def test_search_by_any_part_of_the_id(store: JobStore) -> None:
    jobs = [store.enqueue("t") for _ in range(5)]
    target = jobs[2]
    middle = target.id[25:34]  # random bits: ids made in one millisecond share their head
    page = store.search_jobs(id_part=middle.upper())
    assert _ids(page) == {target.id} and page.complete
    assert store.search_jobs(id_part=middle, status=S.Completed).items == []
    assert len(store.search_jobs(id_part="-").items) == 5


def _fail(store: JobStore, message: str, *, retry: bool, queue: str = "default") -> str:
    job = store.enqueue("t", queue=queue, max_retries=1 if retry else 0)
    [claimed] = [j for j in store.claim("w", [queue], 100) if j.id == job.id]
    error = {"type": "OSError", "message": message, "traceback": None}
    return store.fail(job.id, claimed.lease_token, error).id


def test_search_by_error_text_among_failed_and_scheduled_jobs(store: JobStore) -> None:
    failed = _fail(store, "disk full on /var", retry=False)
    scheduled = _fail(store, "Disk FULL again", retry=True)
    _fail(store, "connection reset", retry=False)
    job_in(store, S.Completed)
    page = store.search_jobs(error="disk full")
    assert _ids(page) == {failed, scheduled} and page.complete
    assert _ids(store.search_jobs(error="disk full", status=S.Failed)) == {failed}
    assert _ids(store.search_jobs(error="oserror", status=S.Scheduled)) == {scheduled}
    assert store.search_jobs(error="disk full", status=S.Queued) == SearchPage([], True, 0)
    assert store.search_jobs(error="100%").items == []  # LIKE wildcards are literal


def test_search_by_payload_field(store: JobStore) -> None:
    ann = store.enqueue("t", {"user": "ann", "n": 3, "ok": True, "none": None}, queue="a")
    bob = store.enqueue("t", {"user": "bob", "n": "3", "ok": 1}, queue="b")
    store.enqueue("t", ["not", "an", "object"])
    store.enqueue("t", None)
    assert _ids(store.search_jobs(payload="user=ann")) == {ann.id}
    assert _ids(store.search_jobs(payload=("user", "bob"))) == {bob.id}
    assert _ids(store.search_jobs(payload="n=3")) == {ann.id}
    assert _ids(store.search_jobs(payload='n="3"')) == {bob.id}
    assert _ids(store.search_jobs(payload="ok=true")) == {ann.id}
    assert _ids(store.search_jobs(payload="ok=1")) == {bob.id}
    assert _ids(store.search_jobs(payload="none=null")) == {ann.id}
    assert _ids(store.search_jobs(payload="user=ann", queue="b")) == set()
    assert _ids(store.search_jobs(payload="user=bob", queue="b", name="t", status=S.Queued)) == {bob.id}
    assert store.search_jobs(payload="missing=1").items == []


def test_search_says_how_far_it_went(handle: StoreHandle) -> None:
    store = handle.store
    old = store.enqueue("t", {"k": 2})
    store.clock_offset_s += 1
    store.enqueue_many([("t", {"k": 1})] * 30)
    page = store.search_jobs(payload="k=2", scan_limit=10)
    if handle.backend == "postgresql":
        assert _ids(page) == {old.id} and page.complete  # the GIN index answers it
    else:
        assert page == SearchPage([], False, 10)
    page = store.search_jobs(payload="k=2", scan_limit=100)
    assert _ids(page) == {old.id} and page.complete
    full = store.search_jobs(payload="k=1", limit=5, scan_limit=10)
    assert len(full.items) == 5 and full.complete  # a full page is an exact page
    # Id and error text are tested within the scan window on every store.
    page = store.search_jobs(id_part=old.id[-6:], scan_limit=10)
    assert page.items == [] and not page.complete and page.scanned == 10
    assert _ids(store.search_jobs(id_part=old.id[-6:], scan_limit=31)) == {old.id}
    [failed] = store.claim("w", ["default"], 1)
    store.fail(
        failed.id, failed.lease_token, {"type": "E", "message": "needle", "traceback": None}, permanent=True
    )
    store.clock_offset_s += 1
    for job in store.claim("w", ["default"], 30):
        store.fail(
            job.id, job.lease_token, {"type": "E", "message": "hay", "traceback": None}, permanent=True
        )
    page = store.search_jobs(error="needle", status=S.Failed, scan_limit=10)
    assert page.items == [] and not page.complete and page.scanned == 10
    page = store.search_jobs(error="needle", scan_limit=100)
    assert _ids(page) == {failed.id} and page.complete and page.scanned <= 100


def test_search_newest_first_with_a_limit(store: JobStore) -> None:
    jobs = []
    for _ in range(4):
        jobs.append(store.enqueue("t", {"k": "x"}))
        store.clock_offset_s += 1
    page = store.search_jobs(payload="k=x", limit=2)
    assert [j.id for j in page.items] == [jobs[3].id, jobs[2].id]


def test_a_scan_window_holds_the_newest_jobs_across_queues(store: JobStore) -> None:
    jobs = []
    for i in range(6):
        jobs.append(store.enqueue("t", queue=f"q{i % 3}"))
        store.clock_offset_s += 1
    page = store.search_jobs(id_part="-", limit=10, scan_limit=4)
    assert [j.id for j in page.items] == [j.id for j in reversed(jobs[2:])]
    assert not page.complete and page.scanned == 4


@pytest.mark.parametrize(
    "kwargs",
    [{"payload": "novalue"}, {"payload": "=3"}, {"payload": "k={}"}, {"limit": 0}, {"scan_limit": 0}],
)
def test_bad_search_criteria_are_refused(store: JobStore, kwargs: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        store.search_jobs(**kwargs)  # type: ignore[arg-type]


def test_a_whole_id_finds_its_job_beyond_the_scan_window(store: JobStore) -> None:
    old = store.enqueue("t", {"k": 1}, queue="a")
    store.clock_offset_s += 1
    store.enqueue_many([("t", {"k": 2})] * 12)
    assert store.search_jobs(id_part=old.id[:30], scan_limit=5) == SearchPage([], False, 5)
    page = store.search_jobs(id_part=f" {old.id.upper()} ", scan_limit=5)
    assert _ids(page) == {old.id} and page == SearchPage(page.items, True, 1)
    assert _ids(store.search_jobs(id_part=old.id, queue="a", payload="k=1", status=S.Queued)) == {old.id}
    assert store.search_jobs(id_part=old.id, queue="b") == SearchPage([], True, 1)
    assert store.search_jobs(id_part=old.id, error="x") == SearchPage([], True, 1)  # no error kept
    store.delete(old.id)
    assert store.search_jobs(id_part=old.id) == SearchPage([], True, 0)
