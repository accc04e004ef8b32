"""Contract: bulk operations on any set of jobs (store/bulk_select.py) on
every store — the job list's error and payload searches and an operator's
selected ids, previewed and counted (exactly, or in a bounded window of the
newest jobs for a search), acted on and nothing else."""

from __future__ import annotations

import uuid

import pytest

from store import bulk, bulk_select
from store.base import JobStore
from store.errors import ValidationError
from store.lifecycle import JobStatus

S = JobStatus


def _fail(store: JobStore, queue: str, errors: list[str], permanent: bool = True) -> list[str]:
    store.enqueue_many(
        [("t", {"i": i, "kind": "odd" if i % 2 else "even"}, queue) for i in range(len(errors))]
    )
    ids = []
    for job in store.claim("w", [queue], len(errors)):
        i = job.payload["i"]
        store.fail(job.id, job.lease_token, {"type": "E", "message": errors[i]}, permanent=permanent)
        ids.append(job.id)
    return ids


def _run(store: JobStore, op):
    while not op.finished:
        op = bulk.run_batch(store, op, batch=3)
    return op


def test_retry_every_failure_with_an_error_text(store: JobStore) -> None:
    errors = ["Timeout talking to smtp", "KeyError: user", "smtp TIMEOUT again", "ok"] * 3
    ids = _fail(store, "mail", errors)
    store.enqueue("t", {"note": "timeout in its payload, no error"}, queue="mail")
    preview = bulk.preview(store, "retry", queue="mail", error="timeout")
    assert preview == bulk.Preview(6, 6, complete=True, scanned=12)  # the 12 Failed, not the Queued one
    op = bulk.start(store, "retry", {"queue": "mail", "error": "timeout"}, "operator:ann", preview.eligible)
    op = _run(store, op)
    assert (op.changed, op.skipped) == (6, 0)
    jobs = [store.get(i) for i in ids]
    assert {j.status for j in jobs if "timeout" in j.error["message"].lower()} == {S.Queued}
    assert {j.status for j in jobs if "timeout" not in j.error["message"].lower()} == {S.Failed}


def test_cancel_by_payload_field(store: JobStore) -> None:
    _fail(store, "default", ["x"] * 6, permanent=False)  # Scheduled, retries left
    assert bulk.preview(store, "cancel", payload="kind=odd") == bulk.Preview(3, 3, complete=True, scanned=6)
    op = _run(store, bulk.start(store, "cancel", {"payload": "kind=odd"}, "operator:ann", 3))
    assert op.changed == 3
    kinds = {j.payload["kind"]: j.status for j in store.list_jobs(limit=50).items}
    assert kinds == {"odd": S.Canceled, "even": S.Scheduled}


def test_a_search_preview_reads_a_bounded_window_and_the_operation_acts_on_every_match(
    store: JobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past PREVIEW_SCAN_LIMIT jobs read, the preview's counts are lower bounds
    (``complete`` False); the operation still walks and changes every match."""
    monkeypatch.setattr(bulk_select, "PREVIEW_SCAN_LIMIT", 4)
    _fail(store, "default", ["x"] * 10, permanent=False)  # 5 odd, 5 even, Scheduled
    preview = bulk.preview(store, "cancel", payload="kind=odd")
    assert (preview.complete, preview.scanned) == (False, 4)
    assert preview.eligible == preview.matching <= 4  # of the 4 read
    op = _run(store, bulk.start(store, "cancel", {"payload": "kind=odd"}, "operator:ann", preview.eligible))
    assert op.changed == 5


def test_act_on_selected_ids_only(store: JobStore) -> None:
    ids = _fail(store, "default", ["x"] * 5)
    queued = store.enqueue("t", {})
    chosen = [ids[0], ids[3], queued.id, str(uuid.uuid4())]  # one Queued (not requeued), one gone
    assert bulk.preview(store, "requeue", ids=",".join(chosen)) == bulk.Preview(2, 3)
    op = bulk.start(store, "requeue", {"ids": chosen}, "operator:ann", 2)
    assert op.filter["ids"].count(",") == 3 and "4 selected" in bulk.describe(op)
    op = _run(store, op)
    assert (op.changed, op.skipped) == (2, 1)
    assert [store.get(i).status for i in ids] == [S.Queued, S.Failed, S.Failed, S.Queued, S.Failed]


def test_a_bad_selection_is_refused_naming_the_field(store: JobStore) -> None:
    with pytest.raises(ValidationError, match="ids"):
        bulk.start(store, "cancel", {"ids": [str(uuid.uuid4()) for _ in range(1001)]}, "operator:ann", 0)
    with pytest.raises(ValidationError, match="ids"):
        bulk.start(store, "cancel", {"ids": ["nope"]}, "operator:ann", 0)
    with pytest.raises(ValidationError, match="payload"):
        bulk.start(store, "cancel", {"payload": "no-equals-sign"}, "operator:ann", 0)
    assert store.operations() == []
