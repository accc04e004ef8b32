"""The data migrations of later revisions (0010 records, 0011 queue-counted
totals, 0012 history minutes and hours), each up and down on SQLite and
PostgreSQL with its rows kept."""

from __future__ import annotations

import time
from collections import Counter

from sqlalchemy import create_engine, text

from store import open_store
from store.sql import migrate
from store.sql.upgrade import alembic_config
from tests.store.migration_db import fetch_rows, scalar, schema_diff, table_names


def test_0011_moves_queue_counted_totals_out_of_the_event_totals_and_back(empty_url: str) -> None:
    """0011: an event kind counted per queue has no total of its own; every
    total reads the same after the upgrade, and the downgrade restores the
    rows as they were."""
    from alembic import command

    config = alembic_config(empty_url)
    command.upgrade(config, "0009")
    rows = [("e:completed", 3, 10), ("q:completed:a", 1, 4), ("q:completed:b", 2, 3), ("e:claimed", 0, 7)]
    rows += [("q:failed:a", 0, 2), ("e:failed", 1, 2), ("s:100:a", 0, 5)]  # as 0009 wrote them: e: >= its q:
    engine = create_engine(empty_url)
    try:
        with engine.begin() as conn:
            for key, shard, n in rows:
                conn.execute(
                    text("INSERT INTO leasehold_counters (key, shard, n) VALUES (:k, :s, :n)"),
                    {"k": key, "s": shard, "n": n},
                )
    finally:
        engine.dispose()
    migrate(empty_url)
    store = open_store(empty_url)
    try:
        assert store.event_counts() == {"completed": 10, "claimed": 7, "failed": 2}
        store.enqueue("t", queue="a")  # counted per queue only from now on
        assert store.event_counts() == {"completed": 10, "claimed": 7, "failed": 2, "enqueued": 1}
        assert store.queue_event_counts()[("a", "enqueued")] == 1
    finally:
        store.close()
    sums = "SELECT COALESCE(SUM(n), 0) FROM leasehold_counters WHERE key = '{}'"
    assert scalar(empty_url, sums.format("e:completed")) == 10 - 7
    assert scalar(empty_url, sums.format("e:enqueued")) == 0
    command.downgrade(config, "0009")
    assert scalar(empty_url, sums.format("e:completed")) == 10
    assert scalar(empty_url, sums.format("e:failed")) == 2
    assert scalar(empty_url, sums.format("e:enqueued")) == 1
    assert scalar(empty_url, sums.format("e:claimed")) == 7


# ------------------------------------------------------------ 0011 <-> 0012
def _history_rows_0011(now: float) -> list[tuple[int, float, str, str, int, int]]:
    """History rows (width, bucket, queue, kind, shard, n) as 0011 wrote
    them around ``now``: every event in a minute bucket and its hour bucket,
    an hour 3 days back whose minutes are trimmed, and events this hour."""
    hour = now // 3600 * 3600
    minutes = [
        (hour - 7200 + 300, "a", "enqueued", 0, 2),
        (hour - 7200 + 300, "a", "enqueued", 1, 1),
        (hour - 7200 + 600, "b", "enqueued", 0, 4),
        (hour - 3600 + 1800, "a", "completed", 1, 3),
        (hour, "a", "enqueued", 0, 5),
        (now // 60 * 60, "b", "failed", 0, 1),
    ]
    rows = [(60, *m) for m in minutes]
    rows += [(3600, b // 3600 * 3600, q, k, s, n) for b, q, k, s, n in minutes]
    rows.append((3600, hour - 72 * 3600, "b", "failed", 0, 7))
    return rows


def _history_reads(rows: list[tuple[int, float, str, str, int, int]], since: float) -> dict:
    """What history(width, since, queue) read from 0011's rows, every width and queue filter."""
    out: dict = {}
    for queue in (None, "a", "b"):
        for width in (60, 3600):
            got: dict = {}
            for w, bucket, q, kind, _, n in rows:
                if w == width and bucket >= since and queue in (None, q):
                    got.setdefault(kind, {})
                    got[kind][float(bucket)] = got[kind].get(float(bucket), 0) + n
            out[(width, queue)] = got
    return out


def test_0012_drops_the_hours_the_minutes_hold_and_downgrade_rebuilds_them(empty_url: str) -> None:
    """0012: the hour buckets from the current one on go and a roll-up mark
    says so; every width reads the same after the upgrade and after a trim,
    and the downgrade gives back the hour buckets 0011 wrote."""
    from alembic import command

    config = alembic_config(empty_url)
    command.upgrade(config, "0011")
    store = open_store(empty_url)  # the store's clock: the one the migration reads
    try:
        now = store.now()
    finally:
        store.close()
    rows = _history_rows_0011(now)
    engine = create_engine(empty_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO leasehold_history (width, bucket, queue, kind, shard, n) "
                    "VALUES (:w, :b, :q, :k, :s, :n)"
                ),
                [dict(zip("wbqksn", r, strict=True)) for r in rows],
            )
    finally:
        engine.dispose()
    sinces = (now - 100 * 3600, now - 5400, now // 3600 * 3600)
    expected = {since: _history_reads(rows, since) for since in sinces}

    def reads() -> dict:
        store = open_store(empty_url)
        try:
            return {
                since: {
                    (w, q): store.history(w, since, queue=q) for w in (60, 3600) for q in (None, "a", "b")
                }
                for since in sinces
            }
        finally:
            store.close()

    migrate(empty_url)
    [(mark,)] = fetch_rows(empty_url, "SELECT n FROM leasehold_counters WHERE key = 'r:3600'")
    assert mark >= now // 3600 * 3600
    later = f"SELECT count(*) FROM leasehold_history WHERE width = 3600 AND bucket >= {mark}"
    assert scalar(empty_url, later) == 0
    assert reads() == expected
    store = open_store(empty_url)
    try:
        store.trim_history()
    finally:
        store.close()
    assert reads() == expected

    command.downgrade(config, "0011")
    assert fetch_rows(empty_url, "SELECT n FROM leasehold_counters WHERE key = 'r:3600'") == []
    hours = fetch_rows(
        empty_url,
        "SELECT bucket, queue, kind, SUM(n) FROM leasehold_history WHERE width = 3600 "
        "GROUP BY bucket, queue, kind ORDER BY bucket, queue, kind",
    )
    wrote: Counter = Counter()
    for w, bucket, q, kind, _, n in rows:
        if w == 3600:
            wrote[(float(bucket), q, kind)] += n
    assert {(float(b), q, k): n for b, q, k, n in hours} == dict(wrote)
    migrate(empty_url)  # and up again
    assert reads() == expected


# ------------------------------------------------------------ 0009 <-> 0010
#: One row of every table revision 0010 turns into records (raw SQL, 0009 columns).
ROWS_0009 = {
    "leasehold_workers": (
        "INSERT INTO leasehold_workers (id, host, pid, queues, concurrency, jobs_in_hand, started_at, "
        "last_seen_at, command, command_by, handlers) VALUES ('w-9', 'host-9', 9, '[\"q\"]', 2, '[]', "
        ':now, :now, \'quiet\', \'operator:ann\', \'[{"name": "h", "queue": "q"}]\')'
    ),
    "leasehold_locks": (
        "INSERT INTO leasehold_locks (name, owner, expires_at) VALUES ('recovery', 'w-9', :later)"
    ),
    "leasehold_recovery_runs": (
        "INSERT INTO leasehold_recovery_runs (id, started_at, finished_at, owner, trigger, recovered, "
        "failed, duration_ms) VALUES ('r-9', :now, :now, 'w-9', 'schedule', 4, 1, 2.5)"
    ),
    "leasehold_maintenance_runs": (
        "INSERT INTO leasehold_maintenance_runs (id, task, started_at, finished_at, owner, count, "
        "duration_ms, longest_batch_ms) VALUES ('m-9', 'retention', :now, :now, 'w-9', 7, 3.0, 1.0)"
    ),
    "leasehold_schedules": (
        "INSERT INTO leasehold_schedules (name, handler, cron, timezone, queue, payload, catch_up, enabled, "
        "last_tick_at, last_job_id, updated_at) VALUES ('nightly', 'h', '0 3 * * *', 'UTC', 'q', "
        "'{\"n\": 1}', 0, 0, :now, 'j-9', :now)"
    ),
    "leasehold_failures": "INSERT INTO leasehold_failures (key, n, window_end) VALUES (:digest, 3, :later)",
    "leasehold_operations": (
        "INSERT INTO leasehold_operations (id, state, created_at, updated_at, body) VALUES ('op-9', "
        '\'running\', :now, :now, \'{"id": "op-9", "action": "cancel", "filter": {"queue": "q"}, '
        '"actor": "operator:ann", "expected": 5, "state": "running", "changed": 2, "skipped": 0, '
        '"cursor": null, "error": null}\')'
    ),
}


def test_0010_moves_every_record_and_downgrade_moves_them_back(empty_url: str) -> None:
    from alembic import command

    from store.bookings import failure_digest

    url = empty_url
    migrate(url, "0009")
    now = time.time()
    params = {"now": now, "later": now + 600, "digest": failure_digest("ann|10.0.0.9")}
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            for sql in ROWS_0009.values():
                conn.execute(text(sql), params)
    finally:
        engine.dispose()

    migrate(url)
    assert not table_names(url) & set(ROWS_0009) and schema_diff(url) == []
    store = open_store(url)
    try:
        [worker] = store.workers()
        assert (worker.id, worker.queues, worker.command, worker.handlers) == (
            "w-9",
            ["q"],
            "quiet",
            [{"name": "h", "queue": "q"}],
        )
        assert store.lock_info("recovery").owner == "w-9" and not store.acquire_lock("recovery", "w-x", 5)
        assert [(r.id, r.recovered) for r in store.recovery_runs()] == [("r-9", 4)]
        assert [(r.id, r.count) for r in store.maintenance_runs("retention")] == [("m-9", 7)]
        [schedule] = store.schedules()
        assert (schedule.payload, schedule.catch_up, schedule.enabled, schedule.last_job_id) == (
            {"n": 1},
            False,
            False,
            "j-9",
        )
        n, left = store.failure_count("ann|10.0.0.9")
        assert n == 3 and left > 500
        [running] = store.operations(unfinished=True)
        assert (running.id, running.filter, running.changed) == ("op-9", {"queue": "q"}, 2)
    finally:
        store.close()

    command.downgrade(alembic_config(url), "0009")
    assert set(ROWS_0009) <= table_names(url) and "leasehold_records" not in table_names(url)
    for table in ROWS_0009:
        assert scalar(url, f"SELECT count(*) FROM {table}") == 1, table
    assert scalar(url, "SELECT command FROM leasehold_workers") == "quiet"
    assert scalar(url, "SELECT n FROM leasehold_failures") == 3
    migrate(url)  # and up again
    assert schema_diff(url) == []
