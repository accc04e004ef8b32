"""Contract: listings are exact at any depth for every filter, and page
backwards as well as forwards — on every store."""

from __future__ import annotations

import time

import pytest

from store.base import MAX_BATCH, JobStore
from store.errors import ValidationError
from store.lifecycle import JobStatus
from store.models import JobSpec, Page
from tests.store.helpers import job_in

S = JobStatus
#: Newer non-matching jobs the rare ones sit under.
NEWER = 10_000


@pytest.mark.slow
def test_rare_jobs_are_on_the_first_page_under_ten_thousand_newer_ones(store: JobStore) -> None:
    rare = {
        "name": [store.enqueue("target", queue="common") for _ in range(3)],
        "queue": [store.enqueue("other", queue="rare") for _ in range(3)],
        "both": [store.enqueue("target", queue="rare") for _ in range(3)],
    }
    store.clock_offset_s += 1  # the newer jobs are strictly newer
    started = time.perf_counter()
    spec = JobSpec("bulk", queue="common")
    for _ in range(NEWER // MAX_BATCH):
        store.enqueue_many([spec] * MAX_BATCH)
    loaded = time.perf_counter() - started
    named = {j.id for j in rare["name"] + rare["both"]}
    queued = {j.id for j in rare["queue"] + rare["both"]}
    both = {j.id for j in rare["both"]}
    cases: dict[tuple[bool, bool, bool], set[str]] = {
        (False, True, False): named,
        (False, False, True): queued,
        (False, True, True): both,
    }
    for with_status in (False, True):
        for (_, with_name, with_queue), want in cases.items():
            page = store.list_jobs(
                status=S.Queued if with_status else None,
                name="target" if with_name else None,
                queue="rare" if with_queue else None,
                limit=3 if want is both else 6,
            )
            assert {j.id for j in page.items} == want, (with_status, with_name, with_queue)
            assert page.next_cursor is None
    status_only = store.list_jobs(status=S.Queued, limit=5)  # newest first: bulk jobs
    assert len(status_only.items) == 5 and {j.name for j in status_only.items} == {"bulk"}
    assert store.list_jobs(status=S.Completed, name="target", limit=5).items == []
    assert store.count_jobs(S.Queued, name="target") == 6
    assert store.count_jobs(S.Queued, name="target", queue="rare") == 3
    assert store.count_jobs(S.Queued, queue="rare") == 6
    assert store.count_jobs(S.Queued, name="bulk", queue="common") == NEWER
    assert store.count_jobs(S.Completed, name="target") == 0
    print(f"enqueued {NEWER:,} jobs in {loaded:.1f} s")


def test_filtered_listing_follows_status_changes(store: JobStore) -> None:
    b = job_in(store, S.Completed, queue="rare")  # claims every due job of its queue: first
    a = store.enqueue("target", queue="rare")
    store.enqueue("other", queue="rare")
    assert [j.id for j in store.list_jobs(status=S.Queued, queue="rare", name="target").items] == [a.id]
    store.cancel(a.id)
    assert store.list_jobs(status=S.Queued, name="target").items == []
    assert store.count_jobs(S.Canceled, name="target", queue="rare") == 1
    assert store.count_jobs(S.Queued, name="target") == 0
    assert [j.id for j in store.list_jobs(status=S.Canceled, name="target", queue="rare").items] == [a.id]
    assert [j.id for j in store.list_jobs(status=S.Completed, queue="rare").items] == [b.id]
    store.delete(a.id)
    assert store.list_jobs(name="target").items == []
    assert store.list_jobs(status=S.Canceled, queue="rare").items == []
    assert store.count_jobs(S.Canceled, name="target", queue="rare") == 0
    assert store.count_jobs(S.Queued, name="other", queue="rare") == 1
    assert store.count_jobs(S.Completed, name=b.name, queue="rare") == 1


def test_a_filter_without_status_merges_every_status_in_order(store: JobStore) -> None:
    jobs = []
    for status in (S.Queued, S.Completed, S.Canceled, S.Scheduled, S.Failed, S.Queued):
        jobs.append(job_in(store, status, queue="mixed"))
        store.clock_offset_s += 1
    newest_first = [j.id for j in reversed(jobs)]
    assert [j.id for j in _walk(store, queue="mixed", limit=2)] == newest_first
    assert [j.id for j in _walk(store, queue="mixed", name="t", limit=4)] == newest_first
    assert [j.id for j in _walk(store, queue="mixed", limit=4, order="asc")] == newest_first[::-1]


def _walk(store: JobStore, **filters: object) -> list:
    out, cursor = [], None
    while True:
        page = store.list_jobs(cursor=cursor, **filters)  # type: ignore[arg-type]
        out += page.items
        if (cursor := page.next_cursor) is None:
            return out


def _pages_forward(store: JobStore, **filters: object) -> list[Page]:
    pages, cursor = [], None
    while True:
        page = store.list_jobs(cursor=cursor, **filters)  # type: ignore[arg-type]
        pages.append(page)
        if (cursor := page.next_cursor) is None:
            return pages


@pytest.mark.parametrize(
    "filters",
    [
        {},
        {"status": S.Queued},
        {"queue": "q1"},
        {"name": "b"},
        {"status": S.Queued, "queue": "q1", "name": "b"},
    ],
    ids=["all", "status", "queue", "name", "all-three"],
)
@pytest.mark.parametrize("order", ["desc", "asc"])
def test_paging_forward_then_backward_returns_the_same_pages(
    store: JobStore, filters: dict[str, object], order: str
) -> None:
    for i in range(11):
        store.enqueue("b" if i % 3 else "c", queue="q1" if i % 4 else "q2")
        store.enqueue("b", queue="q1")  # same clock reading: ties broken by id
        store.clock_offset_s += 0.5
    pages = _pages_forward(store, limit=3, order=order, **filters)
    assert len(pages) >= 3
    assert pages[0].prev_cursor is None
    back = pages[-1]
    for expected in reversed(pages[:-1]):
        assert back.prev_cursor is not None
        back = store.list_jobs(before=back.prev_cursor, limit=3, order=order, **filters)  # type: ignore[arg-type]
        assert [j.id for j in back.items] == [j.id for j in expected.items]
        assert back.next_cursor is not None
    assert back.prev_cursor is None  # the first page again
    again = store.list_jobs(cursor=back.next_cursor, limit=3, order=order, **filters)  # type: ignore[arg-type]
    assert [j.id for j in again.items] == [j.id for j in pages[1].items]


@pytest.mark.parametrize("order", ["desc", "asc"])
def test_a_status_spread_over_many_queues_pages_exactly(store: JobStore, order: str) -> None:
    """A status's jobs in 12 queues, most of the newest (and oldest) in one,
    some in one clock reading (ties broken by id): every page by status
    alone, and without a status, holds the next jobs of the whole order."""
    for i in range(24):
        store.enqueue("t", queue=f"q{i % 12:02d}")
        store.clock_offset_s += 0.5
    store.enqueue_many([JobSpec("t", queue="q05") for _ in range(30)])  # one clock reading
    store.clock_offset_s += 0.5
    for _ in range(10):
        store.enqueue("t", queue="q11")
        store.clock_offset_s += 0.5
    every = sorted(store.list_jobs(limit=100, status=S.Queued).items, key=lambda j: (j.last_updated_at, j.id))
    expected = [j.id for j in (every if order == "asc" else every[::-1])]
    assert len(expected) == 64
    for filters in ({"status": S.Queued}, {}):
        assert [j.id for j in _walk(store, limit=7, order=order, **filters)] == expected
        pages = _pages_forward(store, limit=5, order=order, **filters)
        back = pages[-1]
        for page in reversed(pages[:-1]):
            back = store.list_jobs(before=back.prev_cursor, limit=5, order=order, **filters)  # type: ignore[arg-type]
            assert [j.id for j in back.items] == [j.id for j in page.items]


def test_paging_back_near_the_start_gives_the_first_page(store: JobStore) -> None:
    for _ in range(5):
        store.enqueue("t")
        store.clock_offset_s += 1
    first = store.list_jobs(limit=2)
    second = store.list_jobs(limit=2, cursor=first.next_cursor)
    one_back = store.list_jobs(limit=3, before=second.prev_cursor)  # only 2 exist before it
    assert [j.id for j in one_back.items] == [j.id for j in store.list_jobs(limit=3).items]
    assert one_back.prev_cursor is None
    with pytest.raises(ValidationError):
        store.list_jobs(cursor=first.next_cursor, before=second.prev_cursor)


def test_a_queue_and_a_name_both_common_page_exactly(store: JobStore) -> None:
    """The combination of a common queue and a common name: its jobs sit
    among many of the queue's other names and the name's other queues; the
    pages walk them in order, forwards and back, missing and repeating none."""
    specs = []
    for i in range(600):
        specs.append(JobSpec("common", queue="elsewhere"))
        specs.append(JobSpec("other", queue="busy"))
        if i % 5 == 0:
            specs.append(JobSpec("common", queue="busy"))
    jobs = []
    for i in range(0, len(specs), 100):
        jobs += store.enqueue_many(specs[i : i + 100])
        store.clock_offset_s += 0.001  # some ties within a batch, order across batches
    want = [j.id for j in reversed(jobs) if (j.name, j.queue) == ("common", "busy")]
    assert len(want) == 120
    got, cursor, pages = [], None, []
    while True:
        page = store.list_jobs(status=S.Queued, queue="busy", name="common", limit=25, cursor=cursor)
        pages.append(page)
        got += [j.id for j in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert got == want
    back = store.list_jobs(
        status=S.Queued, queue="busy", name="common", limit=25, before=pages[-1].prev_cursor
    )
    assert [j.id for j in back.items] == want[75:100]
    assert store.count_jobs(S.Queued, queue="busy", name="common") == 120
    oldest = store.list_jobs(queue="busy", name="common", limit=3, order="asc")
    assert [j.id for j in oldest.items] == want[::-1][:3]
