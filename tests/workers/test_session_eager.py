"""Eager mode (the ``leasehold_eager`` fixture) with ``session=``: the job
runs once the session has committed, never after a rollback."""

from __future__ import annotations

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import tests.handlers as th
from store.base import JobStore
from store.lifecycle import JobStatus


def test_eager_mode_runs_a_session_job_after_the_commit_never_after_a_rollback(
    leasehold_eager: JobStore,
) -> None:
    engine = create_engine(leasehold_eager.url)  # type: ignore[attr-defined]
    try:
        with Session(engine) as session:
            dropped = th.noop.enqueue({"n": 1}, session=session)
            assert dropped.status is JobStatus.Queued  # not run inside the transaction
            session.rollback()
            assert leasehold_eager.list_jobs().items == []
            kept = th.noop.enqueue({"n": 2}, session=session)
            session.commit()
        assert leasehold_eager.get(kept.id).status is JobStatus.Completed
        assert [j.id for j in leasehold_eager.list_jobs().items] == [kept.id]
    finally:
        engine.dispose()
