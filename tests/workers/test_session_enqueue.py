"""Jobs enqueued in an application's SQLAlchemy session on SQLite and
PostgreSQL (workers/sessions.py, store/sql/joined.py): written on the
session's connection in its open transaction, so a rollback leaves no trace
in any Leasehold table and a commit leaves exactly the job, which a real
worker then runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, inspect, text
from sqlalchemy.orm import Session

import tests.handlers as th
from leasehold.hooks import job_enqueued
from store.base import JobStore
from store.errors import JobNotFound, ValidationError
from store.lifecycle import JobStatus
from tests.backends import StoreHandle
from tests.conftest import handle_fixture
from tests.workers.procs import Spawner, wait_until
from workers.catalogue import enqueue
from workers.workflows import batch, chain

handle = handle_fixture(["sqlite", "postgresql"])


@pytest.fixture
def host(handle: StoreHandle) -> Iterator[Engine]:
    """The application's own engine on the store's database (a second pool,
    as an application has), with its ``orders`` table."""
    engine = create_engine(handle.url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL)"))
    yield engine
    engine.dispose()


def leasehold_rows(engine: Engine) -> dict[str, list[str]]:
    """Every row of every ``leasehold_`` table, as sorted texts by table."""
    names = [n for n in inspect(engine).get_table_names() if n.startswith("leasehold_")]
    assert "leasehold_jobs" in names and "leasehold_job_events" in names
    with engine.connect() as conn:
        return {n: sorted(map(repr, conn.execute(text(f'SELECT * FROM "{n}"')).all())) for n in names}


def orders(engine: Engine) -> list[int]:
    with engine.connect() as conn:
        return list(conn.execute(text("SELECT id FROM orders ORDER BY id")).scalars())


def add_order(session: Session, order_id: int) -> None:
    session.execute(text("INSERT INTO orders (id, total) VALUES (:i, 10)"), {"i": order_id})


#: Each way of enqueueing with ``session=``; returns the ids of the jobs it wrote.
ENQUEUES = {
    "handler": lambda store, s: [th.noop.enqueue({"n": 1}, store=store, session=s).id],
    "by-name": lambda store, s: [enqueue("noop", {"n": 1}, store=store, session=s).id],
    "delayed": lambda store, s: [th.noop.enqueue(None, store=store, session=s, delay_s=60).id],
    "unique": lambda store, s: [th.noop.enqueue(None, store=store, session=s, unique_key="u1").id],
    "idempotent": lambda store, s: [th.noop.enqueue(None, store=store, session=s, idempotency_key="i1").id],
    "many": lambda store, s: [j.id for j in th.noop.enqueue_many([1, 2, 3], store=store, session=s)],
    "batch": lambda store, s: [
        batch([(th.noop, {"n": n}) for n in range(3)], callback=(th.noop, None), store=store, session=s).id
    ],
    "chain": lambda store, s: [chain((th.noop, 1), (th.noop, 2), store=store, session=s).id],
}


@pytest.mark.parametrize("way", list(ENQUEUES))
def test_a_rollback_leaves_no_trace_in_any_leasehold_table(store: JobStore, host: Engine, way: str) -> None:
    before = leasehold_rows(host)
    with Session(host) as session:
        add_order(session, 1)
        ids = ENQUEUES[way](store, session)
        assert ids and all(ids)
        with session.connection().begin_nested():  # seen inside the transaction, nowhere else
            assert leasehold_rows(host) == before
        session.rollback()
    assert orders(host) == []
    assert leasehold_rows(host) == before
    for job_id in ids:
        with pytest.raises(JobNotFound):
            store.get(job_id)
    assert store.counts().by_status["Queued"] == 0


@pytest.mark.parametrize("way", list(ENQUEUES))
def test_a_commit_keeps_the_jobs_with_the_rows(store: JobStore, host: Engine, way: str) -> None:
    with Session(host) as session:
        add_order(session, 1)
        ids = ENQUEUES[way](store, session)
        session.commit()
    assert orders(host) == [1]
    if way in ("batch", "chain"):
        assert store.get_batch(ids[0]).size in (2, 3)
    else:
        assert [store.get(i).id for i in ids] == ids


def test_a_committed_job_is_there_once_and_a_real_worker_runs_it(
    store: JobStore, host: Engine, spawn: Spawner
) -> None:
    with Session(host) as session:
        add_order(session, 7)
        job = th.noop.enqueue({"order": 7}, store=store, session=session)
        session.commit()
    page = store.list_jobs()
    assert [j.id for j in page.items] == [job.id]
    assert spawn.worker("--burst", "--concurrency", "1").wait() == 0
    done = store.get(job.id)
    assert done.status is JobStatus.Completed
    assert done.payload == {"order": 7}


def test_a_unique_key_taken_in_a_rolled_back_transaction_is_free_again(store: JobStore, host: Engine) -> None:
    with Session(host) as session:
        add_order(session, 1)
        taken = th.noop.enqueue(None, store=store, session=session, unique_key="invoice-1")
        session.rollback()
    job, created = store.enqueue_idempotent(th.noop.spec.job_spec(None, unique_key="invoice-1"))
    assert created and job.id != taken.id
    # And a key held by a committed job is answered with its holder inside a session.
    with Session(host) as session:
        add_order(session, 2)
        again = th.noop.enqueue(None, store=store, session=session, unique_key="invoice-1")
        assert again.id == job.id
        session.commit()
    assert store.counts().by_status["Queued"] == 1


def test_a_savepoint_rolled_back_drops_only_what_was_enqueued_inside_it(
    store: JobStore, host: Engine
) -> None:
    with Session(host) as session:
        kept = th.noop.enqueue("outer", store=store, session=session)
        nested = session.begin_nested()
        dropped = th.noop.enqueue("inner", store=store, session=session)
        nested.rollback()
        session.commit()
    assert store.get(kept.id).payload == "outer"
    with pytest.raises(JobNotFound):
        store.get(dropped.id)


def test_job_enqueued_is_sent_after_the_commit_never_after_a_rollback(store: JobStore, host: Engine) -> None:
    seen: list[str] = []

    def receiver(sender: str, **kw: Any) -> None:
        seen.append(kw["job"].id)

    job_enqueued.connect(receiver)
    try:
        with Session(host) as session:
            th.noop.enqueue(None, store=store, session=session)
            assert seen == []
            session.rollback()
            job = th.noop.enqueue(None, store=store, session=session)
            assert seen == []
            session.commit()
        assert seen == [job.id]
    finally:
        job_enqueued.disconnect(receiver)


def test_a_refused_enqueue_leaves_the_application_transaction_usable(store: JobStore, host: Engine) -> None:
    with Session(host) as session:
        add_order(session, 1)
        with pytest.raises(ValidationError):
            th.noop.enqueue(None, store=store, session=session, priority="high")
        th.noop.enqueue(None, store=store, session=session, idempotency_key="k")
        again = th.noop.enqueue(None, store=store, session=session, idempotency_key="k")
        add_order(session, 2)
        session.commit()
    assert orders(host) == [1, 2]
    assert store.get(again.id).idempotency_key == "k"
    assert store.counts().by_status["Queued"] == 1


def test_a_session_of_another_database_is_refused(store: JobStore, tmp_path: Any) -> None:
    other = create_engine(f"sqlite:///{tmp_path / 'other.db'}")
    with Session(other) as session, pytest.raises(ValidationError) as refused:
        th.noop.enqueue(None, store=store, session=session)
    assert refused.value.field == "session"
    with pytest.raises(ValidationError) as refused:
        th.noop.enqueue(None, store=store, session=object())
    assert refused.value.field == "session"
    other.dispose()


def test_sqlite_an_application_writer_and_a_store_writer_do_not_deadlock(
    handle: StoreHandle, store: JobStore, host: Engine
) -> None:
    """The session holds SQLite's write lock (it wrote its order) while
    another thread's plain enqueue holds the store's writer lock and waits
    for SQLite's: the session's enqueue must not wait for that writer lock."""
    if handle.backend != "sqlite":
        pytest.skip("SQLite's writer lock")
    with Session(host) as session:
        add_order(session, 1)
        other: dict[str, Any] = {}
        thread = threading.Thread(target=lambda: other.update(job=th.noop.enqueue("plain", store=store)))
        thread.start()
        writer = store._writer  # type: ignore[attr-defined]
        wait_until(lambda: writer._depth == 1, 10, "the plain enqueue to hold the writer lock")
        t0 = time.monotonic()
        mine = th.noop.enqueue("mine", store=store, session=session)
        assert time.monotonic() - t0 < 5
        assert "job" not in other  # still waiting for the session's write lock
        session.commit()
    thread.join(30)
    assert not thread.is_alive()
    assert {store.get(mine.id).payload, store.get(other["job"].id).payload} == {"mine", "plain"}


def test_postgresql_wakes_a_waiting_worker_within_100ms_of_the_commit_and_not_before(
    handle: StoreHandle, store: JobStore, host: Engine
) -> None:
    """The enqueue's NOTIFY is sent inside the application's transaction;
    PostgreSQL delivers it at the commit. Measured on the store's own
    listener (store/sql/wakeups.py), over several commits."""
    if handle.backend != "postgresql":
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    waker = store.wakeups(["default"])
    assert waker is not None
    try:
        assert waker.wait(0.01) is None  # connected and listening
        latencies = []
        for n in range(10):
            got: dict[str, Any] = {}

            def listen(got: dict[str, Any] = got) -> None:
                got["notice"] = waker.wait(10)
                got["at"] = time.monotonic()

            with Session(host) as session:
                add_order(session, n)
                job = th.noop.enqueue(n, store=store, session=session)
                thread = threading.Thread(target=listen)
                thread.start()
                thread.join(0.3)
                assert thread.is_alive(), "woken before the commit"
                committed = time.monotonic()
                session.commit()
            thread.join(10)
            assert got["notice"] is not None and got["notice"].job == job.id
            latencies.append(got["at"] - committed)
        print("wake-up after commit, ms:", sorted(round(s * 1000, 1) for s in latencies))
        assert max(latencies) < 0.1
    finally:
        waker.close()


def test_sqlite_a_session_that_read_first_still_enqueues_after_another_write(
    handle: StoreHandle, store: JobStore, host: Engine
) -> None:
    """pysqlite's reads begin no transaction, so the enqueue's ``BEGIN
    IMMEDIATE`` starts one on a fresh snapshot even when another writer
    committed since the session's read."""
    if handle.backend != "sqlite":
        pytest.skip("SQLite's snapshots")
    with Session(host) as session:
        assert orders(host) == [] and session.execute(text("SELECT count(*) FROM orders")).scalar_one() == 0
        store.enqueue("noop", "by another writer")
        job = th.noop.enqueue("mine", store=store, session=session)
        add_order(session, 1)
        session.commit()
    assert store.get(job.id).payload == "mine" and orders(host) == [1]
