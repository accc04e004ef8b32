"""Leasehold handlers of the side-by-side run (LEASEHOLD_HANDLERS adds
``bench.peers.lh_handlers`` to ``tests.handlers``, whose ``noop`` the plain
drain runs).

``bench_full``: the drain's job with every feature on: one progress report,
then the no-op result (who ran it, so ``check_ran`` can tell the lease holder
recorded it). ``bench_stamp``: the latency job, the same body as the peers'
stamp task (``common.stamp_body``, imported on the first stamp so that the
benchmark's Redis client is not in a drain's worker RSS)."""

from __future__ import annotations

from workers import JobContext, handler

#: The fraction ``bench_full`` reports; the drain checks every job holds it.
PROGRESS = 0.5


@handler("bench_full")
def bench_full(ctx: JobContext) -> dict[str, object]:
    ctx.progress(PROGRESS, "halfway")
    return {"worker": ctx.worker_id, "token": ctx.lease_token, "attempt": ctx.attempt}


@handler("bench_stamp")
def bench_stamp(ctx: JobContext) -> None:
    # Imported here: its Redis client is the benchmark's, not the worker's, and
    # must not count in the RSS of a PostgreSQL worker's drain.
    from bench.peers import common

    common.stamp_body(int(ctx.payload["seq"]))
