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
#: Seconds between two looks of ``ledger-gate`` at its gate file.
GATE_POLL_S = 0.05
#: ``ledger-leak``: bytes leaked per step, and the most one process leaks
#: before the handler gives up and raises (nothing killed it: the test fails).
LEAK_STEP_BYTES = 16 * 1024 * 1024
LEAK_LIMIT_BYTES = 1024 * 1024 * 1024
#: Memory ``ledger-leak`` has leaked in this process; it outlives the job,
#: like a real leak in a long-lived pool process.
_LEAKED: list[bytes] = []


def _lease_ttl_s() -> float:
    return float(os.environ.get("LEASEHOLD_LEASE_TTL", "1"))


def append_row(path: str, job_id: str, token: int, worker: str, outcome: str, name: str) -> None:
    """Append one ledger row to ``path`` (one write, O_APPEND). Tests that act
    as a worker themselves (claim and complete) record their runs with it."""
    row = {
        "job_id": job_id,
        "token": token,
        "worker": worker,
        "time": time.time(),
        "outcome": outcome,
        "name": name,
    }
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(row) + "\n").encode())
    finally:
        os.close(fd)


def record(ctx: JobContext, outcome: str) -> None:
    """Append this run's row to the ledger named by LEASEHOLD_TEST_LEDGER."""
    append_row(os.environ[LEDGER_ENV], ctx.job_id, ctx.lease_token, ctx.worker_id, outcome, ctx.name)


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


@handler("ledger-gate")
def ledger_gate(ctx: JobContext) -> dict[str, Any]:
    """Runs until the file ``payload["gate"]`` exists (the test opens the gate
    by creating it), or returns early when ``ctx.cancelled`` is set; raises
    after ``payload["max_s"]`` (default 60) seconds with the gate still shut."""
    gate = str(ctx.payload["gate"])
    deadline = time.monotonic() + float(ctx.payload.get("max_s", 60))
    while not os.path.exists(gate) and not ctx.cancelled.is_set():
        if time.monotonic() >= deadline:
            record(ctx, "raised")
            raise RuntimeError(f"gate {gate} still shut")
        ctx.cancelled.wait(GATE_POLL_S)
    return _finish(ctx)


@handler("ledger-timeout")
def ledger_timeout(ctx: JobContext) -> dict[str, Any]:
    """Sleeps ``payload["seconds"]`` (enqueue it with a shorter ``timeout_s``);
    the worker's timeout sets ``ctx.cancelled``, which ends the sleep."""
    ctx.cancelled.wait(float(ctx.payload["seconds"]))
    return _finish(ctx)


@handler("ledger-leak")
def ledger_leak(ctx: JobContext) -> None:
    """Leaks memory (``LEAK_STEP_BYTES`` a step, every page touched) until its
    process is killed from outside, as the kernel's OOM killer or a container
    memory limit would do; the fault tests play that part with a watchdog. Run
    it in the process pool: a thread-pool worker would be the one killed. At
    ``LEAK_LIMIT_BYTES`` nobody killed it: it raises, and the test fails on
    the error type."""
    while len(_LEAKED) * LEAK_STEP_BYTES < LEAK_LIMIT_BYTES:
        _LEAKED.append(b"\x01" * LEAK_STEP_BYTES)
        time.sleep(0.002)
    record(ctx, "raised")
    raise RuntimeError(f"leaked {LEAK_LIMIT_BYTES >> 20} MiB and nothing killed the process")
