"""Handlers of the job-log tests (tests/workers/test_job_logs.py, bench/job_log_cost.py)."""

from __future__ import annotations

from workers import handler


@handler("log-ten")
def log_ten(ctx):
    for n in range(10):
        ctx.log.info("line %d of job %s", n, ctx.payload.get("tag", ""))
    return {"logged": 10}


@handler("log-nothing")
def log_nothing(ctx):
    ctx.log.debug("below the run logger's level: not kept")
    return {"logged": 0}


@handler("log-untouched")
def log_untouched(ctx):
    return {"logged": 0}  # never reads ctx.log: its logger is never made


@handler("log-silent")
def log_silent(ctx):
    ctx.log.setLevel("WARNING")  # made and configured, and then nothing is logged
    return {"logged": 0}


@handler("log-many")
def log_many(ctx):
    for n in range(ctx.payload["n"]):
        ctx.log.warning("line %05d", n)
    ctx.log.error("with a NUL \x00 and a long tail " + "x" * 10_000)
    return {"logged": ctx.payload["n"] + 1}


@handler("log-then-fail-once", max_retries=2)
def log_then_fail_once(ctx):
    ctx.log.info("attempt %d starts", ctx.attempt + 1)
    if ctx.attempt == 0:
        try:
            raise KeyError("missing")
        except KeyError:
            ctx.log.exception("first attempt fails")
            raise
    ctx.log.info("attempt %d done", ctx.attempt + 1)
    return {"ok": True}
