"""CPU per job of SQLite's batch bookkeeping (docs/architecture.md, "Stores"):
the job events, counters and history buckets ``SqlPlumbing.book`` writes for
a batch of changes, in three forms swapped on one store:

* ``now``: the release's form (events bound one change a row, one
  executemany; counters and buckets over the changes grouped by
  ``bookkeeping.COUNT_COLUMNS``, as JSON);
* ``json``: every change as one JSON array read by ``json_each`` in each of
  the three statements (the form before the grouping);
* ``executemany``: the reference, Python tallies written by executemany
  (the form before the one SQL path).

    .venv/bin/python -m bench.sqlite_booking [--batch 50] [--rounds 40]

Workloads, each ``--rounds`` calls of ``--batch`` jobs on a fresh SQLite
store: ``enqueue``: enqueue_many; ``claim+ack``: claim then complete_many.
The figure is process CPU per job (microseconds: SQLite runs in-process),
the median of 3 runs, the forms alternating run by run.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from bench.stores import FreshStores
from store import open_store
from store.counters import HISTORY_WIDTHS, event_key, queue_event_key, status_key
from store.sql import bookkeeping as bk
from store.sql.plumbing import BOOK_KEYS, Precompiled
from store.sql.store import SqlStore

FORMS = ("now", "json", "executemany")
_EVENTS = (
    "INSERT INTO leasehold_job_events (job_id, at, kind, from_status, to_status, actor, token, message)"
    " VALUES (?, ((julianday('now') - 2440587.5) * 86400.0) + ?, ?, ?, ?, ?, ?, ?)"
)
_COUNTERS = (
    "INSERT INTO leasehold_counters (key, shard, n) VALUES (?, ?, ?) ON CONFLICT (key, shard)"
    " DO UPDATE SET n = leasehold_counters.n + excluded.n"
)
_HISTORY = (
    "INSERT INTO leasehold_history (width, bucket, queue, kind, shard, n) VALUES"
    " (?, CAST((((julianday('now') - 2440587.5) * 86400.0) + ?) / ? AS INTEGER) * ?, ?, ?, ?, ?)"
    " ON CONFLICT (width, bucket, queue, kind, shard) DO UPDATE SET n = leasehold_history.n + excluded.n"
)


def json_book(store: SqlStore) -> Callable[[Any, Sequence[dict[str, Any]]], None]:
    """The JSON form: every change sent to each of the three statements."""
    dialect = store.write_engine.dialect
    events = Precompiled(
        bk.record_events(store.dialect.changes_from(), store._now), dialect, BOOK_KEYS, lambda: 0.0
    )

    def book(conn: Any, changes: Sequence[dict[str, Any]]) -> None:
        if not changes:
            return
        rows = [{**c, "weight": 1} for c in changes]
        params = [{"changes": orjson.dumps(rows).decode(), "shard": 0}]
        if any(c["logged"] for c in changes):
            events.run(conn, params)
        store._q_counters.run(conn, params)
        if any(c["counted"] for c in changes):
            store._q_history.run(conn, params)

    return book


def executemany_book(conn: Any, changes: Sequence[dict[str, Any]]) -> None:
    """The reference: tallies in Python, three executemany calls."""
    deltas: Counter[str] = Counter()
    buckets: Counter[tuple[str, str]] = Counter()
    events = []
    for c in changes:
        queue, kind = c["queue"], c["kind"]
        if queue is not None and c["to_status"] is not None:
            deltas[status_key(c["to_status"], queue)] += 1
        if queue is not None and c["from_status"] is not None:
            deltas[status_key(c["from_status"], queue)] -= 1
        if c["counted"]:
            buckets[(queue, kind)] += 1
            deltas[queue_event_key(kind, queue)] += 1
        elif kind is not None:
            deltas[event_key(kind)] += 1
        if c["logged"]:
            row = (c["from_status"], c["to_status"], c["actor"], c["token"], c["message"])
            events.append((c["job_id"], 0.0, kind, *row))
    if events:
        conn.exec_driver_sql(_EVENTS, events)
    counts = [(k, 0, n) for k, n in sorted(deltas.items()) if n]
    if counts:
        conn.exec_driver_sql(_COUNTERS, counts)
    if buckets:
        rows = [(w, 0.0, w, w, q, k, 0, n) for (q, k), n in sorted(buckets.items()) for w in HISTORY_WIDTHS]
        conn.exec_driver_sql(_HISTORY, rows)


def run(form: str, url: str, workload: str, batch: int, rounds: int) -> float:
    """CPU microseconds per job of ``rounds`` calls of ``workload`` in ``form``."""
    store = open_store(url)
    assert isinstance(store, SqlStore)
    if form == "json":
        store.book = json_book(store)  # type: ignore[method-assign]
    elif form == "executemany":
        store.book = executemany_book  # type: ignore[method-assign,assignment]
    try:
        if workload == "claim+ack":
            store.enqueue_many([("bench", {"i": i}) for i in range(batch * rounds)])
        t0 = time.process_time()
        for r in range(rounds):
            if workload == "enqueue":
                store.enqueue_many([("bench", {"i": i}) for i in range(r * batch, (r + 1) * batch)])
            else:
                jobs = store.claim("w", ["default"], batch)
                store.complete_many([(j.id, j.lease_token, None) for j in jobs], worker_id="w")
        return (time.process_time() - t0) / (batch * rounds) * 1e6
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    import sqlite3

    print(f"SQLite {sqlite3.sqlite_version}; batch {args.batch}, {args.rounds} calls a run, median of 3")
    stores = FreshStores(Path(tempfile.mkdtemp(prefix="lh-booking-")))
    for workload in ("enqueue", "claim+ack"):
        took: dict[str, list[float]] = {f: [] for f in FORMS}
        for _ in range(3):
            for form in FORMS:  # alternating: one run of each form in turn
                with stores.fresh("sqlite") as url:
                    took[form].append(run(form, url, workload, args.batch, args.rounds))
        med = {f: statistics.median(v) for f, v in took.items()}
        figures = ", ".join(f"{f} {med[f]:.1f}" for f in FORMS)
        print(f"{workload}: CPU us/job {figures}")
        now, json_, many = med["now"], med["json"], med["executemany"]
        print(f"  now/json {now / json_:.2f}, now/executemany {now / many:.2f}")


if __name__ == "__main__":
    main()
