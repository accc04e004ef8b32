"""Fill a store with finished jobs fast, for the figures "at scale".

Running a million jobs through enqueue, claim and complete takes minutes per
store; the loaders here take seconds to a minute. They write what the store
writes, by copying: one template job is enqueued, claimed and completed by
the store itself, then its row (hash) and its events are copied to ``n - 1``
new ids with their own times, and the counters are raised by the same
amounts. The copies are spread back in time (0.05 s apart, ending before the
template), so jobs run afterwards are the newest. Then the SQL stores are
VACUUMed / ANALYZEd, as autovacuum or an operator would have done by then.

* Redis: the store's bulk fixtures (``store/redis/fixtures.py``, its
  ``copy_jobs`` function), 1,000 copies a call (a call blocks the server a
  few ms), indexed and counted as the store's own functions do;
* PostgreSQL: ``INSERT … SELECT`` over ``generate_series`` (ids from
  ``gen_random_uuid()``), events from the template's with a join;
* SQLite: the same with a recursive CTE (ids from ``randomblob``).

    .venv/bin/python -m bench.scale --store redis --jobs 100000

(on its own, it loads a fresh store, prints the rate and the store's counts,
and removes it).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from bench.redis_store import PAYLOAD
from store import JobStore, open_store
from store.models import Job
from store.sql.schema import counters, job_events, jobs

#: Seconds between the times of consecutive copies.
SPACING_S = 0.05
#: Time columns a copy takes its own value in (the rest are the template's).
TIME_COLUMNS = ("created_at", "due_at", "started_at", "last_heartbeat_at", "completed_at", "last_updated_at")
#: Copies per SQL statement.
SQL_CHUNK = 100_000
LOADER = "bench-loader"


def template_job(store: JobStore) -> Job:
    """One job run through the store itself: enqueued, claimed, completed."""
    job = store.enqueue("noop", PAYLOAD)
    [claimed] = store.claim(LOADER, ["default"], 1)
    assert claimed.id == job.id, "the store was not empty"
    return store.complete(job.id, claimed.lease_token, {"worker": LOADER, "token": 1, "attempt": 0}, LOADER)


def load_finished(store: JobStore, n: int, progress: bool = True) -> float:
    """Make the store hold ``n`` more Completed jobs (see the module
    docstring); the store must hold no job of queue ``default``. Returns
    the seconds taken."""
    t0 = time.perf_counter()
    template = template_job(store)
    events = Counter(e.kind for e in store.events(template.id))
    copies = n - 1
    url: str = store.url  # type: ignore[attr-defined]
    if url.startswith(("sqlite", "postgresql")):
        _load_sql(url, template, copies, events, progress)
    else:
        _load_redis(store, template, copies, events, progress)
    return time.perf_counter() - t0


def _say(done: int, total: int, t0: float, progress: bool) -> None:
    if progress and (done == total or done % 100_000 == 0):
        rate = done / max(time.perf_counter() - t0, 1e-9)
        print(f"#   loaded {done:,} of {total:,} ({rate:,.0f}/s)", file=sys.stderr, flush=True)


def _load_redis(store: Any, template: Job, copies: int, events: Counter[str], progress: bool) -> None:
    """The copies through the store's own bulk fixtures (store/redis/fixtures.py)."""
    from store.redis.fixtures import CHUNK, Copy, copy_jobs

    end = template.created_at.timestamp()
    t0 = time.perf_counter()
    for start in range(0, copies, CHUNK):
        stop = min(copies, start + CHUNK)
        batch = [Copy(str(uuid.uuid4()), end - (copies - i) * SPACING_S) for i in range(start, stop)]
        copy_jobs(store, template.id, template.queue, batch, events)
        _say(stop, copies, t0, progress)


def _copy_jobs_sql(dialect: str) -> str:
    """INSERT of copies ``:lo``..``:hi`` of job ``:template``, every column
    the template's except the id and the times (``:end - (:copies - i) * :step``)."""
    if dialect == "postgresql":
        series = "generate_series(CAST(:lo AS bigint), CAST(:hi AS bigint)) AS g(i)"
        new_id = "gen_random_uuid()::text"
    else:
        series = (
            "(WITH RECURSIVE s(i) AS (SELECT :lo UNION ALL SELECT i + 1 FROM s WHERE i < :hi)"
            " SELECT i FROM s) AS g"
        )
        new_id = (
            "lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)"
            " || '-' || substr('89ab', 1 + abs(random()) % 4, 1) || substr(hex(randomblob(2)), 2)"
            " || '-' || hex(randomblob(6)))"
        )
    cols, exprs = [], []
    for column in jobs.c:
        cols.append(f'"{column.name}"')
        if column.name == "id":
            exprs.append(new_id)
        elif column.name in TIME_COLUMNS:
            exprs.append("CAST(:end AS double precision) - (:copies - g.i) * :step")
        else:
            exprs.append(f't."{column.name}"')
    return (
        f"INSERT INTO {jobs.name} ({', '.join(cols)}) SELECT {', '.join(exprs)} "
        f"FROM {jobs.name} AS t CROSS JOIN {series} WHERE t.id = :template"
    )


def _copy_events_sql() -> str:
    """INSERT of the template's events for the copies whose time lies in
    [:t_lo, :t_hi] (found by leasehold_ix_jobs_updated), at the copy's time."""
    cols = [c.name for c in job_events.c if c.name != "id"]
    exprs = ["j.id" if c == "job_id" else "j.last_updated_at" if c == "at" else f'e."{c}"' for c in cols]
    return (
        f"INSERT INTO {job_events.name} ({', '.join(f'{chr(34)}{c}{chr(34)}' for c in cols)}) "
        f"SELECT {', '.join(exprs)} FROM {jobs.name} AS j CROSS JOIN {job_events.name} AS e "
        "WHERE e.job_id = :template AND j.last_updated_at BETWEEN :t_lo AND :t_hi AND j.id <> :template "
        "ORDER BY j.last_updated_at, j.id, e.id"
    )


def _load_sql(url: str, template: Job, copies: int, events: Counter[str], progress: bool) -> None:
    engine = create_engine(url)
    dialect = engine.dialect.name
    copy_jobs, copy_events = text(_copy_jobs_sql(dialect)), text(_copy_events_sql())
    end = template.created_at.timestamp()
    upsert = text(
        f"INSERT INTO {counters.name} (key, shard, n) VALUES (:key, 0, :n) "
        f"ON CONFLICT (key, shard) DO UPDATE SET n = {counters.name}.n + excluded.n"
    )
    try:
        t0 = time.perf_counter()
        for lo in range(0, copies, SQL_CHUNK):
            hi = min(copies, lo + SQL_CHUNK) - 1
            params = {"lo": lo, "hi": hi, "copies": copies, "step": SPACING_S, "end": end}
            with engine.begin() as conn:
                conn.execute(copy_jobs, {**params, "template": template.id})
                conn.execute(
                    copy_events,
                    {
                        "template": template.id,
                        "t_lo": end - (copies - lo) * SPACING_S - SPACING_S / 2,
                        "t_hi": end - (copies - hi) * SPACING_S + SPACING_S / 2,
                    },
                )
            _say(hi + 1, copies, t0, progress)
        with engine.begin() as conn:
            rows = [{"key": f"s:{int(template.status)}:{template.queue}", "n": copies}]
            rows += [{"key": f"e:{kind}", "n": copies * count} for kind, count in events.items()]
            conn.execute(upsert, rows)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE" if dialect == "postgresql" else "ANALYZE"))
            if dialect == "postgresql":
                # Write the load's dirty pages out now, as the checkpoints of the
                # hours a real store took to reach this size would have: without it
                # the checkpoints that max_wal_size forces after a 1,000,000-row load
                # flush gigabytes during the measurement (the 3x "latency at scale"
                # of PostgreSQL was that I/O, not the store; see the README).
                conn.execute(text("CHECKPOINT"))
    finally:
        engine.dispose()


def main() -> None:
    from bench.stores import FreshStores

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="redis", choices=["sqlite", "postgresql", "redis"])
    parser.add_argument("--jobs", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stores = FreshStores(Path(tmp))
        try:
            with stores.fresh(args.store) as url, open_store(url) as store:
                seconds = load_finished(store, args.jobs)
                print(f"{args.store}: {args.jobs:,} finished jobs in {seconds:.1f} s "
                      f"({args.jobs / seconds:,.0f}/s); counts {store.counts().by_status}")  # fmt: skip
        finally:
            stores.close()


if __name__ == "__main__":
    main()
