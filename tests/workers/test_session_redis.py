"""Jobs enqueued with ``session=`` on the Redis store (workers/sessions.py):
held by the session and enqueued after it commits, never after a rollback
(a SAVEPOINT's rollback drops what was enqueued inside it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session, scoped_session, sessionmaker

import tests.handlers as th
from leasehold.hooks import job_enqueued
from store import open_store
from store.base import JobStore
from store.errors import StoreUnavailable, ValidationError
from store.models import Job
from tests.conftest import handle_fixture
from workers.catalogue import enqueue
from workers.sessions import Pending
from workers.workflows import batch

handle = handle_fixture(["redis"])


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Engine]:
    """The application's database (SQLite here; the jobs live in Redis)."""
    engine = create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE orders (id INTEGER PRIMARY KEY)"))
    yield engine
    engine.dispose()


def jobs_in(store: JobStore) -> list[Job]:
    return store.list_jobs(limit=100).items


def test_no_job_after_a_rollback_and_one_after_a_commit(store: JobStore, host: Engine) -> None:
    with Session(host) as session:
        session.execute(text("INSERT INTO orders (id) VALUES (1)"))
        dropped = th.noop.enqueue({"order": 1}, store=store, session=session)
        assert isinstance(dropped, Pending) and not dropped.done
        assert jobs_in(store) == []  # held until the commit
        session.rollback()
        assert jobs_in(store) == [] and dropped.result is None
        session.execute(text("INSERT INTO orders (id) VALUES (2)"))
        kept = th.noop.enqueue({"order": 2}, store=store, session=session)
        assert jobs_in(store) == []
        session.commit()
    assert isinstance(kept, Pending) and kept.done
    assert [j.id for j in jobs_in(store)] == [kept.result.id]
    assert kept.result.payload == {"order": 2}
    assert store.counts().by_status["Queued"] == 1


def test_savepoints_scoped_sessions_and_every_enqueue(store: JobStore, host: Engine) -> None:
    session = scoped_session(sessionmaker(host))  # what Flask-SQLAlchemy's db.session is
    try:
        outer = enqueue("noop", "outer", store=store, session=session)
        nested = session.begin_nested()
        inner = th.noop.enqueue("inner", store=store, session=session)
        nested.rollback()
        nested = session.begin_nested()
        many = th.noop.enqueue_many(["a", "b"], store=store, session=session)
        nested.commit()
        group = batch([(th.noop, 1), (th.noop, 2)], store=store, session=session)
        assert jobs_in(store) == []
        session.commit()
    finally:
        session.remove()
    assert inner.result is None and not inner.done
    payloads = sorted(str(j.payload) for j in jobs_in(store))
    assert payloads == ["1", "2", "a", "b", "outer"]
    assert outer.result is not None and len(many.result) == 2
    assert store.get_batch(group.result.id).size == 2


def test_bad_input_is_refused_at_the_call_not_at_the_commit(store: JobStore, host: Engine) -> None:
    seen: list[str] = []

    def receiver(sender: str, **kw: Any) -> None:
        seen.append(kw["job"].id)

    job_enqueued.connect(receiver)
    try:
        with Session(host) as session:
            with pytest.raises(ValidationError):
                th.noop.enqueue(None, store=store, session=session, priority="high")
            held = th.noop.enqueue(None, store=store, session=session)
            assert seen == []
            session.commit()
        assert seen == [held.result.id]
        assert len(jobs_in(store)) == 1
    finally:
        job_enqueued.disconnect(receiver)


def test_an_enqueue_that_fails_after_the_commit_is_raised_and_the_session_stays_usable(host: Engine) -> None:
    dead = open_store("redis://127.0.0.1:1/0")  # nothing listens there
    try:
        with Session(host) as session:
            session.execute(text("INSERT INTO orders (id) VALUES (1)"))
            lost = th.noop.enqueue(None, store=dead, session=session)
            with pytest.raises(StoreUnavailable):
                session.commit()
            assert lost.result is None and isinstance(lost.error, StoreUnavailable)
            assert session.execute(text("SELECT count(*) FROM orders")).scalar_one() == 1  # committed
            session.execute(text("INSERT INTO orders (id) VALUES (2)"))
            session.commit()
        with host.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM orders")).scalar_one() == 2
    finally:
        dead.close()
