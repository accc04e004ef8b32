"""The Alembic migrations build exactly the schema the store's code declares,
and upgrade a populated database of an earlier release with every row kept."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.migration import MigrationContext
from alembic.operations import Operations
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text
from sqlalchemy.exc import SQLAlchemyError

from store import open_store
from store.errors import ValidationError
from store.lifecycle import JobStatus
from store.sql import migrate
from store.sql.indexes import metadata
from store.sql.upgrade import VERSION_TABLE, alembic_config
from tests.backends import PgTemplate, SqliteTemplate, empty_pg_database
from tests.store.migration_db import fetch_rows, scalar, schema_diff, table_names


def test_sqlite_migration_matches_schema(sqlite_template: SqliteTemplate) -> None:
    url = f"sqlite:///{sqlite_template.path}"
    assert schema_diff(url) == []
    engine = create_engine(url)
    with engine.connect() as conn:
        ddl = conn.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE name = 'leasehold_ix_jobs_ready'"
        ).scalar_one()
    engine.dispose()
    assert "priority DESC" in ddl and "WHERE status IN (100, 200)" in ddl


def test_postgresql_migration_matches_schema(pg_template: PgTemplate) -> None:
    assert schema_diff(pg_template.url_for(pg_template.name)) == []


def test_postgresql_jobs_table_keeps_room_for_row_versions(pg_template: PgTemplate) -> None:
    """Migration 0006's fillfactor is on the table (Alembic does not compare
    storage parameters): a claim's or an ack's row version fits on its page."""
    url = pg_template.url_for(pg_template.name)
    declared = ScriptDirectory.from_config(alembic_config(url)).get_revision("0006").module.JOBS_FILLFACTOR
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            options = conn.execute(
                text("SELECT reloptions FROM pg_class WHERE relname = 'leasehold_jobs'")
            ).scalar_one()
    finally:
        engine.dispose()
    assert options == [f"fillfactor={declared}"]


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(ValidationError, match="unknown store URL scheme"):
        open_store("mysql://localhost/x")


# ------------------------------------------------------------------ 0001 → 0002
LEGACY_TABLES = ("jobs", "job_events", "counters", "workers", "locks", "recovery_runs")
NEW_TABLES = tuple(f"leasehold_{t}" for t in LEGACY_TABLES)
#: Every table of the current schema.
ALL_TABLES = tuple(table.name for table in metadata.sorted_tables)
JOB_COLUMNS = (
    "id, name, queue, status, priority, payload, result, error, retry_count, max_retries, "
    "due_at, worker_id, lease_token, lease_expires_at, timeout_seconds, created_at, "
    "started_at, completed_at, last_updated_at, idempotency_key"
)


def _upgrade_as_release_0001(url: str) -> None:
    """Build revision 0001 as releases before 0002 did: its tables unprefixed,
    its revision stamped in Alembic's default ``alembic_version``."""
    script = ScriptDirectory.from_config(alembic_config(url))
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            ctx = MigrationContext.configure(conn)
            with Operations.context(ctx):
                script.get_revision("0001").module.create_schema("")
            ctx.stamp(script, "0001")
    finally:
        engine.dispose()


def _populate_0001(url: str, now: float) -> dict[str, dict]:
    """Rows of every 0001 table, written with raw SQL; the jobs by id."""
    jobs = {
        "00000000-0000-4000-8000-000000000001": dict(
            status=100, queue="mail", payload='{"to": "a@example.com"}', result=None, error=None, token=0
        ),
        "00000000-0000-4000-8000-000000000002": dict(
            status=300, queue="mail", payload='{"to": "b@example.com"}', result=None, error=None, token=3
        ),
        "00000000-0000-4000-8000-000000000003": dict(
            status=400, queue="reports", payload="[1, 2]", result='{"rows": 7}', error=None, token=1
        ),
        "00000000-0000-4000-8000-000000000004": dict(
            status=500,
            queue="reports",
            payload="null",
            result=None,
            error='{"type": "RuntimeError", "message": "boom", "traceback": null}',
            token=2,
        ),
    }
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            for i, (job_id, j) in enumerate(jobs.items()):
                running = j["status"] == 300
                conn.execute(
                    text(
                        f"INSERT INTO jobs ({JOB_COLUMNS}) VALUES (:id, 'legacy.task', :queue, :status, "
                        ":prio, :payload, :result, :error, 0, 3, :due, :worker, :token, :expires, 60.0, "
                        ":created, :started, :done, :updated, :key)"
                    ),
                    dict(
                        id=job_id,
                        queue=j["queue"],
                        status=j["status"],
                        prio=i,
                        payload=j["payload"],
                        result=j["result"],
                        error=j["error"],
                        due=now - 100 + i,
                        worker="w-legacy" if running else None,
                        token=j["token"],
                        expires=now + 3600 if running else None,
                        created=now - 100 + i,
                        started=now - 50 if j["status"] >= 300 else None,
                        done=now - 10 if j["status"] >= 400 else None,
                        updated=now - 10 + i,
                        key=f"key-{i}",
                    ),
                )
                conn.execute(
                    text(
                        "INSERT INTO job_events (job_id, at, kind, from_status, to_status, actor) "
                        "VALUES (:id, :at, 'enqueued', NULL, 100, 'api')"
                    ),
                    dict(id=job_id, at=now - 100 + i),
                )
                if j["status"] >= 300:
                    conn.execute(
                        text(
                            "INSERT INTO job_events (job_id, at, kind, from_status, to_status, actor, token) "
                            "VALUES (:id, :at, 'claimed', 100, 300, 'w-legacy', :token)"
                        ),
                        dict(id=job_id, at=now - 50, token=j["token"]),
                    )
            counters = [(f"s:{j['status']}:{j['queue']}", 0, 1) for j in jobs.values()]
            counters += [("e:enqueued", 0, 3), ("e:enqueued", 5, 1), ("e:claimed", 2, 3)]
            for key, shard, n in counters:
                conn.execute(
                    text("INSERT INTO counters (key, shard, n) VALUES (:key, :shard, :n)"),
                    {"key": key, "shard": shard, "n": n},
                )
            conn.execute(
                text(
                    "INSERT INTO workers (id, host, pid, queues, concurrency, jobs_in_hand, started_at, "
                    "last_seen_at) VALUES ('w-legacy', 'host-1', 4242, '[\"mail\"]', 2, :held, :s, :s)"
                ),
                {"held": '["00000000-0000-4000-8000-000000000002"]', "s": now - 5},
            )
            conn.execute(
                text("INSERT INTO locks (name, owner, expires_at) VALUES ('legacy-lock', 'w-legacy', :e)"),
                {"e": now + 3600},
            )
            conn.execute(
                text(
                    "INSERT INTO recovery_runs (id, started_at, finished_at, owner, trigger, recovered, "
                    "failed, duration_ms) VALUES ('00000000-0000-4000-8000-0000000000aa', :s, :f, "
                    "'w-legacy', 'schedule', 5, 1, 12.5)"
                ),
                {"s": now - 30, "f": now - 29.9},
            )
    finally:
        engine.dispose()
    return jobs


def _head(url: str) -> str | None:
    return ScriptDirectory.from_config(alembic_config(url)).get_current_head()


def test_populated_0001_database_upgrades_with_every_row_kept(empty_url: str) -> None:
    url = empty_url
    _upgrade_as_release_0001(url)
    now = time.time()
    jobs = _populate_0001(url, now)
    assert {"alembic_version", *LEGACY_TABLES} <= table_names(url)

    migrate(url)

    tables = table_names(url)
    assert not tables & {"alembic_version", *LEGACY_TABLES}
    # The 0001 tables of records (workers, locks, recovery_runs) are rows of
    # leasehold_records since 0010: checked below through the store.
    assert set(NEW_TABLES) & set(ALL_TABLES) | {VERSION_TABLE, "leasehold_records"} <= tables
    head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    assert scalar(url, f"SELECT version_num FROM {VERSION_TABLE}") == head
    assert schema_diff(url) == []

    store = open_store(url)
    try:
        for i, (job_id, row) in enumerate(jobs.items()):
            job = store.get(job_id)
            assert (job.status, job.queue, job.priority, job.lease_token) == (
                JobStatus(row["status"]),
                row["queue"],
                i,
                row["token"],
            )
            assert job.payload == json.loads(row["payload"])
            assert job.result == (json.loads(row["result"]) if row["result"] else None)
            assert job.error == (json.loads(row["error"]) if row["error"] else None)
            assert job.idempotency_key == f"key-{i}"
            kinds = [e.kind for e in store.events(job_id)]
            assert kinds == (["enqueued", "claimed"] if row["status"] >= 300 else ["enqueued"])
        [run] = store.recovery_runs()
        assert (run.id, run.owner, run.recovered, run.failed, run.duration_ms) == (
            "00000000-0000-4000-8000-0000000000aa",
            "w-legacy",
            5,
            1,
            12.5,
        )
        [worker] = store.workers()
        assert (worker.id, worker.queues, worker.jobs_in_hand) == (
            "w-legacy",
            ["mail"],
            ["00000000-0000-4000-8000-000000000002"],
        )
        assert store.lock_info("legacy-lock").owner == "w-legacy"
        counts = store.counts()
        assert counts.by_status["Queued"] == 1 and counts.by_status["InProgress"] == 1
        assert counts.by_queue["reports"] == {"Completed": 1, "Failed": 1}
        assert store.event_counts() == {"enqueued": 4, "claimed": 3}

        # The store goes on: an old job's lease is honoured, new jobs get new event ids.
        running = "00000000-0000-4000-8000-000000000002"
        assert store.complete(running, 3, {"sent": True}).status is JobStatus.Completed
        new = store.enqueue("after.upgrade", {"n": 1}, queue="mail")
        claimed = store.claim("w-new", ["mail"], limit=10)
        assert [j.id for j in claimed] == ["00000000-0000-4000-8000-000000000001", new.id]
        assert store.events(new.id)[-1].kind == "claimed"
        assert store.counts().by_queue["mail"] == {"InProgress": 2, "Completed": 1}
    finally:
        store.close()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A new empty PostgreSQL database of this test alone, dropped afterwards."""
    url, drop = empty_pg_database()
    try:
        yield url
    finally:
        drop()


def _tables_by_schema(url: str) -> dict[str, set[str]]:
    rows = fetch_rows(
        url,
        "SELECT schemaname, tablename FROM pg_tables "
        "WHERE schemaname NOT IN ('pg_catalog', 'information_schema')",
    )
    found: dict[str, set[str]] = {}
    for schema, table in rows:
        found.setdefault(schema, set()).add(table)
    return found


def test_pg_schema_holds_every_table(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEASEHOLD_PG_SCHEMA", "lh_ops")
    migrate(pg_url)  # creates the schema
    migrate(pg_url)  # and finds it at head the second time
    assert _tables_by_schema(pg_url) == {"lh_ops": {*ALL_TABLES, VERSION_TABLE}}
    indexes = {
        name for (name,) in fetch_rows(pg_url, "SELECT indexname FROM pg_indexes WHERE schemaname = 'lh_ops'")
    }
    assert indexes and all(name.startswith("leasehold_") for name in indexes)

    store = open_store(pg_url)  # LEASEHOLD_PG_SCHEMA from the environment
    try:
        job = store.enqueue("in.schema", {"n": 1})
        assert [j.id for j in store.claim("w", ["default"])] == [job.id]
    finally:
        store.close()
    assert fetch_rows(pg_url, "SELECT id FROM lh_ops.leasehold_jobs") == [(job.id,)]

    migrate(pg_url, pg_schema="lh_other")  # the parameter wins over the variable
    assert _tables_by_schema(pg_url)["lh_other"] == {*ALL_TABLES, VERSION_TABLE}


@pytest.mark.parametrize("name", ["LH", "lh-ops", "1lh", "pg_lh", "lh ops; DROP", "x" * 64])
def test_bad_pg_schema_name_is_refused_with_the_variable_named(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "postgresql+psycopg://nobody@127.0.0.1:1/none"  # refused before connecting
    with pytest.raises(ValidationError, match=r"^LEASEHOLD_PG_SCHEMA: ") as exc:
        migrate(url, pg_schema=name)
    assert "\n" not in str(exc.value)
    monkeypatch.setenv("LEASEHOLD_PG_SCHEMA", name)
    with pytest.raises(ValidationError, match=r"^LEASEHOLD_PG_SCHEMA: "):
        open_store(url)


def test_pg_schema_refuses_0001_tables_left_in_public(pg_url: str) -> None:
    _upgrade_as_release_0001(pg_url)
    _populate_0001(pg_url, time.time())
    with pytest.raises(
        ValidationError, match=r"^LEASEHOLD_PG_SCHEMA: Leasehold's 0001 tables are in schema public"
    ):
        migrate(pg_url, pg_schema="lh_ops")
    # Nothing changed: the schema's creation was rolled back with the rest.
    assert _tables_by_schema(pg_url) == {"public": {"alembic_version", *LEGACY_TABLES}}
    assert fetch_rows(pg_url, "SELECT count(*) FROM pg_namespace WHERE nspname = 'lh_ops'") == [(0,)]


@pytest.mark.parametrize("app_revision", ["ae1027a6acf", "0001"])
def test_application_alembic_version_is_left_alone(empty_url: str, app_revision: str) -> None:
    """An application's own history stays as it is, even when its revision is
    named like one of Leasehold's, and so does its own ``jobs`` table."""
    engine = create_engine(empty_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)"))
            conn.execute(text("INSERT INTO alembic_version VALUES (:r)"), {"r": app_revision})
            conn.execute(text("CREATE TABLE jobs (id INTEGER PRIMARY KEY, title VARCHAR(50))"))
            conn.execute(text("INSERT INTO jobs VALUES (1, 'the application''s')"))
    finally:
        engine.dispose()

    migrate(empty_url)

    assert fetch_rows(empty_url, "SELECT version_num FROM alembic_version") == [(app_revision,)]
    assert fetch_rows(empty_url, "SELECT id, title FROM jobs") == [(1, "the application's")]
    assert scalar(empty_url, f"SELECT version_num FROM {VERSION_TABLE}") == _head(empty_url)
    assert table_names(empty_url) == {"alembic_version", "jobs", *ALL_TABLES, VERSION_TABLE}


def test_sqlite_ignores_pg_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEASEHOLD_PG_SCHEMA", "Not-A-Schema")
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    migrate(url)
    store = open_store(url)
    try:
        assert store.get(store.enqueue("t", {}).id).name == "t"
    finally:
        store.close()


def test_failed_upgrade_leaves_the_0001_database_as_it_was(empty_url: str) -> None:
    """The upgrade is one transaction: the version table's move and the renames
    are undone when the last rename fails (a name taken by someone else)."""
    _upgrade_as_release_0001(empty_url)
    _populate_0001(empty_url, time.time())
    engine = create_engine(empty_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE blocker (x INTEGER)"))
            conn.execute(text("CREATE INDEX leasehold_ix_recovery_runs_started ON blocker (x)"))
    finally:
        engine.dispose()

    with pytest.raises(SQLAlchemyError, match="leasehold_ix_recovery_runs_started"):
        migrate(empty_url)

    assert table_names(empty_url) == {"alembic_version", "blocker", *LEGACY_TABLES}
    assert fetch_rows(empty_url, "SELECT version_num FROM alembic_version") == [("0001",)]
    assert scalar(empty_url, "SELECT count(*) FROM jobs") == 4
