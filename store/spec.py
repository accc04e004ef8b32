"""What ``enqueue`` takes (JobSpec), its limits and its validation, done once
before anything is written. The API checks the same limits earlier."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any

import orjson

from store.errors import ValidationError

#: Limits checked at enqueue (the API checks them earlier, with the same numbers).
MAX_NAME_LEN = 200
MAX_QUEUE_LEN = 100
MAX_IDEMPOTENCY_KEY_LEN = 200
MAX_PRIORITY = 1_000_000
MAX_RETRIES_LIMIT = 100
MAX_TIMEOUT_S = 7 * 24 * 3600.0
MAX_DELAY_S = 365 * 24 * 3600.0
MIN_LEASE_TTL_S = 0.1


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What ``enqueue`` takes. None fields take the store's defaults."""

    name: str
    payload: Any = None
    queue: str = "default"
    priority: int = 0
    max_retries: int | None = None
    timeout_s: float | None = None
    lease_ttl_s: float | None = None
    delay_s: float = 0.0
    headers: dict[str, str] | None = None
    route_params: dict[str, Any] | None = None
    query_params: dict[str, Any] | None = None
    idempotency_key: str | None = None
    #: Unique jobs: while a job with this key is Queued, Scheduled or
    #: InProgress, or younger than ``unique_for`` seconds, enqueue returns it
    #: instead of adding one. The key defaults to the name and the canonical
    #: payload when only ``unique_for`` is given (``unique_key_of``).
    unique_key: str | None = None
    unique_for: float | None = None
    #: Flow control (store/flow.py): the partition key of per-key limits; the
    #: ids of jobs this one waits for (Scheduled with no due time until the
    #: last finishes); what a failed or canceled parent does ("cancel", the
    #: default, or "run"); the batch it belongs to (set by ``create_batch``).
    limit_key: str | None = None
    depends_on: tuple[str, ...] | None = None
    on_parent_failure: str | None = None
    batch_id: str | None = None

    @property
    def uses_flow(self) -> bool:
        """True when the spec needs the store's flow control."""
        return bool(self.limit_key or self.depends_on or self.on_parent_failure or self.batch_id)


def _finite(fld: str, value: float | None, low: float, high: float) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError(fld, "must be a finite number")
    if not low <= value <= high:
        raise ValidationError(fld, f"must be within [{low:g}, {high:g}]")


def _int(fld: str, value: int | None, low: int, high: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(fld, "must be an integer")
    if not low <= value <= high:
        raise ValidationError(fld, f"must be within [{low}, {high}]")


def _text(fld: str, value: str | None, limit: int, required: bool) -> None:
    if value is None and not required:
        return
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(fld, "must be a non-empty string")
    if len(value) > limit:
        raise ValidationError(fld, f"must be at most {limit} characters")


def validate_spec(spec: JobSpec) -> JobSpec:
    """Check a spec before anything is written.

    Raises ValidationError naming the first bad field. JSON fields must
    serialise (orjson, strict: no NaN, str keys)."""
    _text("name", spec.name, MAX_NAME_LEN, True)
    _text("queue", spec.queue, MAX_QUEUE_LEN, True)
    _text("idempotency_key", spec.idempotency_key, MAX_IDEMPOTENCY_KEY_LEN, False)
    _int("priority", spec.priority, -MAX_PRIORITY, MAX_PRIORITY)
    _int("max_retries", spec.max_retries, 0, MAX_RETRIES_LIMIT)
    _finite("timeout_s", spec.timeout_s, 0.001, MAX_TIMEOUT_S)
    _finite("lease_ttl_s", spec.lease_ttl_s, MIN_LEASE_TTL_S, MAX_TIMEOUT_S)
    _finite("delay_s", spec.delay_s, 0.0, MAX_DELAY_S)
    _text("unique_key", spec.unique_key, MAX_IDEMPOTENCY_KEY_LEN, False)
    _finite("unique_for", spec.unique_for, 0.0, MAX_DELAY_S)
    _text("limit_key", spec.limit_key, MAX_IDEMPOTENCY_KEY_LEN, False)
    if spec.on_parent_failure is not None and spec.on_parent_failure not in ("cancel", "run"):
        raise ValidationError("on_parent_failure", "must be 'cancel' or 'run'")
    if spec.depends_on is not None:
        if isinstance(spec.depends_on, str) or not all(isinstance(i, str) and i for i in spec.depends_on):
            raise ValidationError("depends_on", "must be a list of job ids")
        if len(spec.depends_on) > 10_000:
            raise ValidationError("depends_on", "must name at most 10000 jobs")
    if spec.on_parent_failure is not None and not spec.depends_on:
        raise ValidationError("on_parent_failure", "needs depends_on")
    for fld in ("name", "queue"):
        if "\x00" in getattr(spec, fld):
            raise ValidationError(fld, "must not contain NUL characters")
    for fld in ("payload", "headers", "route_params", "query_params"):
        try:
            encoded = orjson.dumps(getattr(spec, fld))
        except TypeError as exc:
            raise ValidationError(fld, f"must be JSON-serialisable ({exc})") from None
        if b"\\u0000" in encoded:  # PostgreSQL text and JSONB cannot hold NUL
            raise ValidationError(fld, "must not contain NUL characters")
    return spec


def as_spec(item: JobSpec | tuple[Any, ...]) -> JobSpec:
    """Accept a JobSpec or a ``(name, payload)`` / ``(name, payload, queue)`` tuple."""
    if isinstance(item, JobSpec):
        return item
    if isinstance(item, tuple) and 1 <= len(item) <= 3:
        return JobSpec(*item)
    raise ValidationError("jobs", "each item must be a JobSpec or (name, payload[, queue])")


def unique_key_of(spec: JobSpec) -> str | None:
    """The key a unique job is known by: ``spec.unique_key``, else (with
    ``unique_for``) ``<name>:<sha256 of the payload as canonical JSON>``
    (orjson with sorted keys), else None (not a unique job)."""
    if spec.unique_key is not None:
        return spec.unique_key
    if spec.unique_for is None:
        return None
    canonical = orjson.dumps(spec.payload, option=orjson.OPT_SORT_KEYS)
    return f"{spec.name}:{hashlib.sha256(canonical).hexdigest()}"
