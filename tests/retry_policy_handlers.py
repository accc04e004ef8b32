"""Handlers of the per-handler retry policy tests (tests/workers/test_retry_policy.py):
each raises the exception its payload names (``{"raise": "KeyError"}``)."""

from __future__ import annotations

from workers import JobContext, handler

ERRORS: dict[str, type[Exception]] = {"KeyError": KeyError, "ValueError": ValueError}


def _raise(ctx: JobContext) -> None:
    raise ERRORS[ctx.payload["raise"]](f"raised on attempt {ctx.attempt}")


@handler("retry-on-key-error", max_retries=3, retry_on=(KeyError,), retry_base=30, retry_max_delay=600)
def retry_on_key_error(ctx: JobContext) -> None:
    """Only a KeyError retries, 60 s then 120 s later (30 s * 2**n)."""
    _raise(ctx)


@handler("give-up-on-value-error", max_retries=3, give_up_on=ValueError, retry_base=20, retry_max_delay=600)
def give_up_on_value_error(ctx: JobContext) -> None:
    """A ValueError fails for good at once; anything else retries, 40 s later."""
    _raise(ctx)


@handler("slow-own-backoff", max_retries=2, retry_on=(KeyError,), retry_base=45, retry_max_delay=600)
def slow_own_backoff(ctx: JobContext) -> None:
    """Outlives its timeout (enqueued with 0.2 s): retried, whatever retry_on says, with its own backoff."""
    ctx.cancelled.wait(30)
