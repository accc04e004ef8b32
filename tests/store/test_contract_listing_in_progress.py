"""Contract: listings of InProgress jobs are exact and ordered like every
other status's (the Redis store serves them from its leases zset, not from
listing indexes: store/redis/listing.py)."""

from __future__ import annotations

import pytest

from store.base import JobStore
from store.lifecycle import JobStatus
from store.models import Page
from tests.store.helpers import job_in

S = JobStatus


def _claim_over_time(store: JobStore) -> list:
    """Ten jobs claimed one by one as time moves (two claimed at one reading:
    ties broken by id), over queues q1, q2 and names a, b; finished jobs of
    the same queues around them. Returns the InProgress jobs, as stored."""
    ids = []
    for i in range(5):
        job_in(store, S.Completed if i % 2 else S.Canceled, queue="q1")
        for j in range(2):
            ids.append(store.enqueue("a" if (i + j) % 3 else "b", queue="q1" if (i + j) % 2 else "q2").id)
        store.claim(f"w-{i}", ["q1", "q2"], 2)
        store.clock_offset_s += 0.5
    running = [store.get(job_id) for job_id in ids]
    assert all(j.status is S.InProgress for j in running)
    return running


def _walk(store: JobStore, **filters: object) -> list[Page]:
    pages, cursor = [], None
    while True:
        page = store.list_jobs(cursor=cursor, limit=3, **filters)  # type: ignore[arg-type]
        pages.append(page)
        if (cursor := page.next_cursor) is None:
            return pages


@pytest.mark.parametrize(
    "filters",
    [{}, {"queue": "q1"}, {"name": "a"}, {"queue": "q2", "name": "b"}],
    ids=["status", "queue", "name", "queue-name"],
)
@pytest.mark.parametrize("order", ["desc", "asc"])
def test_in_progress_pages_are_exact_in_both_directions(
    store: JobStore, filters: dict[str, str], order: str
) -> None:
    fresh = {j.id: j for j in _claim_over_time(store)}
    wanted = [
        j for j in fresh.values() if all(getattr(j, field) == value for field, value in filters.items())
    ]
    wanted.sort(key=lambda j: (j.last_updated_at, j.id), reverse=order == "desc")
    pages = _walk(store, status=S.InProgress, order=order, **filters)
    assert [j.id for p in pages for j in p.items] == [j.id for j in wanted]
    assert store.count_jobs(S.InProgress, name=filters.get("name", "a"), queue=filters.get("queue")) == len(
        [j for j in fresh.values() if j.name == filters.get("name", "a")
         and (filters.get("queue") is None or j.queue == filters["queue"])]
    )  # fmt: skip
    back = pages[-1]
    for expected in reversed(pages[:-1]):
        assert back.prev_cursor is not None
        back = store.list_jobs(before=back.prev_cursor, limit=3, status=S.InProgress, order=order, **filters)  # type: ignore[arg-type]
        assert [j.id for j in back.items] == [j.id for j in expected.items]


def test_in_progress_jobs_merge_into_listings_without_a_status(store: JobStore) -> None:
    running = _claim_over_time(store)
    for order in ("desc", "asc"):
        pages = _walk(store, order=order)
        listed = [j for p in pages for j in p.items]
        keys = [(j.last_updated_at, j.id) for j in listed]
        assert keys == sorted(keys, reverse=order == "desc") and len(set(keys)) == len(keys)
        assert {j.id for j in running} <= {j.id for j in listed}
        assert len(listed) == len(running) + 5  # and the five finished jobs
        back = store.list_jobs(before=pages[-1].prev_cursor, limit=3, order=order)
        assert [j.id for j in back.items] == [j.id for j in pages[-2].items]
    every = [j for p in _walk(store, queue="q1") for j in p.items]
    assert {j.status for j in every} == {S.InProgress, S.Completed, S.Canceled}
    keys = [(j.last_updated_at, j.id) for j in every]
    assert keys == sorted(keys, reverse=True)
    assert len(every) == len({j.id for j in every}) == store.list_jobs(queue="q1", limit=100).items.__len__()
    done = next(j for j in every if j.status is S.InProgress)
    store.complete(done.id, done.lease_token, None)
    assert done.id not in [j.id for p in _walk(store, status=S.InProgress) for j in p.items]
    assert done.id in [j.id for j in store.list_jobs(status=S.Completed, queue=done.queue, limit=100).items]
