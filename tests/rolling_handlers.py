"""A handler new in a release (LEASEHOLD_HANDLERS=tests.handlers,tests.rolling_handlers):
the rolling-deploy test runs it beside workers of the old release, which lack it."""

from __future__ import annotations

from workers import JobContext, handler


@handler("new-in-release", queue="default")
def new_in_release(ctx: JobContext) -> dict[str, object]:
    return {"worker": ctx.worker_id, "attempt": ctx.attempt}
