"""Handlers the worker tests run (LEASEHOLD_HANDLERS=tests.handlers).

Each returns who ran it (worker id and token) so tests can tell which lease
holder recorded the result.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from workers import JobContext, PermanentError, Retry, Snooze, handler


def _who(ctx: JobContext, **extra: object) -> dict[str, object]:
    return {"worker": ctx.worker_id, "token": ctx.lease_token, "attempt": ctx.attempt, **extra}


@handler("noop")
def noop(ctx: JobContext) -> dict[str, object]:
    return _who(ctx)


@handler("sleep")
def sleep(ctx: JobContext) -> dict[str, object]:
    """Sleep ``payload["seconds"]``, regardless of cancellation."""
    time.sleep(float(ctx.payload["seconds"]))
    return _who(ctx)


@handler("sleep_first")
def sleep_first(ctx: JobContext) -> dict[str, object]:
    """Sleep ``payload["seconds"]`` on the first lease only (token 1); later
    holders (after a crash, a pause or a release) return at once."""
    if ctx.lease_token == 1:
        time.sleep(float(ctx.payload["seconds"]))
    return _who(ctx)


@handler("wait_cancel")
def wait_cancel(ctx: JobContext) -> dict[str, object]:
    """Wait until ``ctx.cancelled`` is set (at most ``payload["seconds"]``)."""
    cancelled = ctx.cancelled.wait(float(ctx.payload.get("seconds", 60)))
    return _who(ctx, cancelled=cancelled)


@handler("hold")
def hold(ctx: JobContext) -> dict[str, object]:
    """Run until the file ``payload["path"]`` exists (at most two minutes):
    the test decides when the job ends."""
    deadline = time.monotonic() + 120
    while not os.path.exists(ctx.payload["path"]) and time.monotonic() < deadline:
        time.sleep(0.02)
    return _who(ctx)


@handler("progress_hold")
def progress_hold(ctx: JobContext) -> dict[str, object]:
    """Report (0.5, "halfway"); when ``payload["path"]`` is given, run until
    that file exists (at most two minutes); report (0.9, "almost"), return."""
    ctx.progress(0.5, "halfway")
    path = (ctx.payload or {}).get("path")
    deadline = time.monotonic() + 120
    while path and not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)
    ctx.progress(0.9, "almost")
    return _who(ctx)


@handler("crash")
def crash(ctx: JobContext) -> None:
    """Kill the process running the job: a poison job."""
    os._exit(1)


@handler("not_json")
def not_json(ctx: JobContext) -> object:
    return object()


@handler("boom")
def boom(ctx: JobContext) -> None:
    raise ValueError("boom")


@handler("permanent")
def permanent(ctx: JobContext) -> None:
    raise PermanentError("bad input, do not retry")


@handler("defaults", queue="special", max_retries=7, timeout=42)
def defaults(ctx: JobContext) -> dict[str, object]:
    return _who(ctx)


@handler("stepwise")
def stepwise(ctx: JobContext) -> dict[str, object]:
    """Report progress ``payload["steps"]`` times, one step every
    ``payload["step_s"]`` seconds, then return."""
    steps = int(ctx.payload["steps"])
    for i in range(1, steps + 1):
        time.sleep(float(ctx.payload["step_s"]))
        ctx.progress(i / steps, f"step {i} of {steps}")
    return _who(ctx)


@handler("aio")
async def aio(ctx: JobContext) -> dict[str, object]:
    """An async handler: report (0.5, "async halfway"), await
    ``payload["seconds"]`` (default 0), report (1.0, "async done"), return who ran
    it and its loop's id. When its task is cancelled it touches
    ``payload["cancelled_path"]`` (if given) and lets the cancellation go on."""
    payload = ctx.payload or {}
    ctx.progress(0.5, "async halfway")
    try:
        await asyncio.sleep(float(payload.get("seconds", 0)))
    except asyncio.CancelledError:
        if payload.get("cancelled_path"):
            Path(payload["cancelled_path"]).touch()
        raise
    ctx.progress(1.0, "async done")
    return _who(ctx, loop=id(asyncio.get_running_loop()))


@handler("retry_after")
def retry_after(ctx: JobContext) -> dict[str, object]:
    """``raise Retry(after=payload["after"])`` on the first attempt, then return."""
    if ctx.attempt == 0:
        raise Retry(after=float(ctx.payload["after"]))
    return _who(ctx)


@handler("snoozer", max_snoozes=2)
def snoozer(ctx: JobContext) -> dict[str, object]:
    """Snooze (``payload["after"]`` s) while the lease token is at most
    ``payload["snoozes"]``, then return; max_snoozes=2."""
    if ctx.lease_token <= int(ctx.payload["snoozes"]):
        raise Snooze(after=float(ctx.payload["after"]))
    return _who(ctx)
