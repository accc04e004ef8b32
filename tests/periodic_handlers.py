"""A periodic job for the scheduler tests (LEASEHOLD_HANDLERS=tests.periodic_handlers).

Its schedule comes from the environment so each test picks it:
TEST_PERIODIC_CRON (default every second), TEST_PERIODIC_TZ (UTC),
TEST_PERIODIC_CATCH_UP (1 or 0), TEST_PERIODIC_QUEUE (default)."""

from __future__ import annotations

import os

from workers import JobContext, handler

CRON = os.environ.get("TEST_PERIODIC_CRON", "* * * * * *")
TZ = os.environ.get("TEST_PERIODIC_TZ", "UTC")
CATCH_UP = os.environ.get("TEST_PERIODIC_CATCH_UP", "1") == "1"
QUEUE = os.environ.get("TEST_PERIODIC_QUEUE", "default")


@handler("tick", QUEUE, cron=CRON, timezone=TZ, catch_up=CATCH_UP, payload={"from": "schedule"})
def tick(ctx: JobContext) -> dict[str, object]:
    return {"headers": ctx.headers, "worker": ctx.worker_id}
