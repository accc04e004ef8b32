"""Fill a store with finished jobs fast, for the figures "at scale".

Running a million jobs through enqueue, claim and complete takes minutes per
store; the fixture loader of the store (bench/fixtures/) takes seconds to a
minute: one template job is enqueued, claimed and completed by the store
itself, then ``n - 1`` copies of it are written with their own ids and times
by the store's engine (SQL: INSERT … SELECT from a JSON array with the
bookkeeping statements; Redis: bench/fixtures/fixtures.lua, 1,000 copies a call), as
its own paths would have written them. The copies are spread back in time
(0.05 s apart, ending before the template), so jobs run afterwards are the
newest. The SQL stores are then VACUUMed / ANALYZEd.

    .venv/bin/python -m bench.scale --store redis --jobs 100000

(on its own, it loads a fresh store, prints the rate and the store's counts,
and removes it).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.fixtures import Copy, load_copies, make_templates
from bench.redis_store import PAYLOAD
from store import JobStore, open_store
from store.lifecycle import JobStatus

#: Seconds between the times of consecutive copies.
SPACING_S = 0.05


def load_finished(store: JobStore, n: int, progress: bool = True) -> float:
    """Make the store hold ``n`` more Completed jobs (see the module
    docstring); the store must hold no due job of queue ``default``. Returns
    the seconds taken."""
    t0 = time.perf_counter()
    [template] = make_templates(
        store, [JobStatus.Completed], queue="default", name="noop", payload=PAYLOAD
    ).values()
    assert template.created_at is not None
    end, copies = template.created_at.timestamp(), n - 1

    def each() -> Iterator[Copy]:
        for i in range(copies):
            yield Copy(JobStatus.Completed, "default", "noop", end - (copies - i) * SPACING_S)
            if progress and (i + 1) % 100_000 == 0:
                rate = (i + 1) / max(time.perf_counter() - t0, 1e-9)
                print(f"#   loaded {i + 1:,} of {copies:,} ({rate:,.0f}/s)", file=sys.stderr, flush=True)

    load_copies(store, {JobStatus.Completed: template}, each())
    return time.perf_counter() - t0


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
