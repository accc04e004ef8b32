"""The fixture loader (bench/fixtures/), on every store: copies of jobs of
each status read back (get, list_jobs by status, queue and name, counts,
event totals, history, timelines, the claim and the leases) exactly as jobs
of the same life made by the store's own paths."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from sqlalchemy import text

from bench.fixtures import AT_FIELDS, LEASE_FIELDS, STATUSES, Copy, copy_rows, load_copies, make_templates
from store.base import JobStore
from store.counters import HISTORY_KINDS
from store.lifecycle import JobStatus
from store.models import ts

S = JobStatus
PER_STATUS = 200
QUEUES = ("fx-a", "fx-b")
NAMES = ("alpha", "beta", "gamma")
#: Seconds between copies: 1,200 copies over 100 minutes, across hours of history.
STEP_S = 5.0


def kinds_of(store: JobStore, job_id: str) -> list[str]:
    return [str(getattr(e.kind, "value", e.kind)) for e in store.events(job_id)]


def history_totals(store: JobStore, since: float) -> Counter[tuple[int, str, float]]:
    return Counter(
        {
            (w, kind, b): n
            for w in (60, 3600)
            for kind, bs in store.history(w, since).items()
            for b, n in bs.items()
        }
    )


def test_copies_read_back_as_jobs_of_the_normal_paths(store: JobStore) -> None:
    templates = make_templates(store, queue="tpl", name="tpl", payload={"t": 0})
    now = store.now()
    copies = []
    for i in range(PER_STATUS * len(STATUSES)):
        status = STATUSES[i % len(STATUSES)]
        at = now - 3600 - (PER_STATUS * len(STATUSES) - i) * STEP_S
        due = now + 3600 + i if status is S.Scheduled else None
        queue, name = QUEUES[(i // 18) % 2], NAMES[(i // 6) % 3]
        # ids out of time order (a permutation), so no listing or claim order can come from ids alone
        job_id = f"fx-{(i * 7919) % (PER_STATUS * len(STATUSES)):05d}"
        copies.append(Copy(status, queue, name, at, {"i": i}, f"error {i}", due, id=job_id))
    since = now - 86400
    counts0, events0, by_queue0 = store.counts(), store.event_counts(), store.queue_event_counts()
    history0 = history_totals(store, since)
    rows = list(copy_rows(templates, copies))
    ids = [c.id for c in copies]
    assert load_copies(store, templates, iter(copies)) == len(copies)
    url: str = store.url  # type: ignore[attr-defined]
    if url.startswith(
        "sqlite"
    ):  # the planner's statistics were written (a SQLite store picks its indexes by them)
        stats = store.read(text("SELECT count(*) AS n FROM sqlite_stat1"))  # type: ignore[attr-defined]
        assert stats[0]["n"] > 0

    # get: the template's job with the copy's own fields and times
    kinds = {s: kinds_of(store, t.id) for s, t in templates.items()}
    for i, (job_id, c, row) in enumerate(zip(ids, copies, rows, strict=True)):
        t = templates[c.status]
        want = replace(t, id=job_id, queue=c.queue, name=c.name, payload={"i": i})
        changes: dict[str, object] = {f: ts(c.at) for f in AT_FIELDS if getattr(t, f) is not None}
        changes |= {f: ts(row["lease"]) for f in LEASE_FIELDS if getattr(t, f) is not None}
        if t.retry_delay_until is not None:
            changes["retry_delay_until"] = ts(c.due_at if c.due_at is not None else c.at)
        if t.error is not None:
            changes["error"] = {**t.error, "message": c.message}
        got = store.get(job_id)
        assert got == replace(want, **changes), c
        timeline = store.events(job_id)
        assert [str(getattr(e.kind, "value", e.kind)) for e in timeline] == kinds[c.status]
        assert {e.at for e in timeline} == {ts(c.at)}

    # listings and index counts by status, queue and name: newest first
    by_filter: dict[tuple[JobStatus, str | None, str | None], list[str]] = {}
    for job_id, c in zip(ids, copies, strict=True):
        for key in ((c.status, c.queue, None), (c.status, None, c.name), (c.status, c.queue, c.name)):
            by_filter.setdefault(key, []).append(job_id)
    for (status, queue, name), want_ids in by_filter.items():
        page = store.list_jobs(status=status, queue=queue, name=name, limit=500)
        assert [j.id for j in page.items] == want_ids[::-1], (status, queue, name)
        assert store.count_jobs(status, queue=queue, name=name) == len(want_ids)

    # counters: jobs by status and queue, event totals, per-queue totals, history
    counts = store.counts()
    for status in STATUSES:
        added = sum(1 for c in copies if c.status is status)
        assert counts.by_status[status.name] == counts0.by_status[status.name] + added
        for queue in QUEUES:
            assert counts.by_queue[queue][status.name] == sum(
                1 for c in copies if c.status is status and c.queue == queue
            )
    events = Counter(kind for c in copies for kind in kinds[c.status])
    assert Counter(store.event_counts()) - Counter(events0) == events
    per_queue = Counter((c.queue, k) for c in copies for k in kinds[c.status] if k in HISTORY_KINDS)
    assert Counter(store.queue_event_counts()) - Counter(by_queue0) == per_queue
    buckets = Counter(
        (w, k, float(c.at // w * w))
        for c in copies
        for k in kinds[c.status]
        if k in HISTORY_KINDS
        for w in (60, 3600)
    )
    assert history_totals(store, since) - history0 == buckets

    # the claim takes Queued copies in due order; the leases of InProgress copies have expired
    queued = [i for i, c in zip(ids, copies, strict=True) if c.status is S.Queued and c.queue == "fx-a"]
    assert [j.id for j in store.claim("w-1", ["fx-a"], 5)] == queued[:5]
    assert store.expired_lease_count() == PER_STATUS
