"""Handlers of the fault tests: each execution appends one row to a ledger.

The ledger is the oracle the fault tests check the store against: a JSON
line ``{"job_id", "token", "worker", "time", "outcome", "name"}`` per run,
appended with one ``write`` on an ``O_APPEND`` descriptor (so rows from many
processes never interleave), to the file named by LEASEHOLD_TEST_LEDGER.
A row is written when the run ends; a run killed mid-way leaves none.
``outcome`` is ``ok`` (the handler returned normally and was not told to
stop), ``cancelled`` (it returned after ``ctx.cancelled`` was set) or
``raised``.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from typing import Any

from workers import JobContext, handler

LEDGER_ENV = "LEASEHOLD_TEST_LEDGER"
#: Share of ``ledger-flaky`` payloads that raise (percent), chosen by a CRC of the payload.
FLAKY_PERCENT = 5


def _lease_ttl_s() -> float:
    return float(os.environ.get("LEASEHOLD_LEASE_TTL", "1"))


def record(ctx: JobContext, outcome: str) -> None:
    """Append this run's row to the ledger (one write, O_APPEND)."""
    row = {
        "job_id": ctx.job_id,
        "token": ctx.lease_token,
        "worker": ctx.worker_id,
        "time": time.time(),
        "outcome": outcome,
        "name": ctx.name,
    }
    fd = os.open(os.environ[LEDGER_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(row) + "\n").encode())
    finally:
        os.close(fd)


def _finish(ctx: JobContext) -> dict[str, Any]:
    record(ctx, "cancelled" if ctx.cancelled.is_set() else "ok")
    return {"token": ctx.lease_token, "worker": ctx.worker_id}


def flaky_payload(payload: Any) -> bool:
    """True for the ~5% of payloads ``ledger-flaky`` raises for (deterministic)."""
    return zlib.crc32(json.dumps(payload, sort_keys=True).encode()) % 100 < FLAKY_PERCENT


@handler("ledger-noop")
def ledger_noop(ctx: JobContext) -> dict[str, Any]:
    return _finish(ctx)


@handler("ledger-flaky")
def ledger_flaky(ctx: JobContext) -> dict[str, Any]:
    """Raises on the first ``payload["fail_attempts"]`` (default 2) attempts of a
    flaky payload; a retry with ``attempt`` at or past that succeeds."""
    if flaky_payload(ctx.payload) and ctx.attempt < int(ctx.payload.get("fail_attempts", 2)):
        record(ctx, "raised")
        raise RuntimeError(f"flaky payload, attempt {ctx.attempt}")
    return _finish(ctx)


@handler("ledger-long")
def ledger_long(ctx: JobContext) -> dict[str, Any]:
    """Runs ``payload["seconds"]`` (default 3 x the lease TTL), returning early
    when ``ctx.cancelled`` is set; the worker renews the lease meanwhile."""
    seconds = float((ctx.payload or {}).get("seconds", 3 * _lease_ttl_s()))
    ctx.cancelled.wait(seconds)
    return _finish(ctx)


@handler("ledger-timeout")
def ledger_timeout(ctx: JobContext) -> dict[str, Any]:
    """Sleeps ``payload["seconds"]`` (enqueue it with a shorter ``timeout_s``);
    the worker's timeout sets ``ctx.cancelled``, which ends the sleep."""
    ctx.cancelled.wait(float(ctx.payload["seconds"]))
    return _finish(ctx)
