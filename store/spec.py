"""What ``enqueue`` takes (JobSpec), its limits and its validation, done once
before anything is written (the API checks the same limits earlier), and
the one rule for NUL characters in text that reaches a store.

NUL (``\\x00``): PostgreSQL's text and JSONB cannot hold it, so no store
takes it, whatever its engine (one behaviour on every store):

* data (a payload, headers, params at enqueue; a handler's result at ack)
  is refused with ValidationError naming the field, nothing written: a
  store never alters data a program reads back (``refuse_nul``);
* text written for people (an error's type, message and traceback, a
  progress message, an audit entry's detail) has each NUL replaced by
  U+FFFD, so a failure is never lost to its own text (``scrub_nul``).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
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
#: Latest ``run_at`` / ``expires_at`` taken, epoch seconds (2100-01-01 UTC).
MAX_EPOCH_S = 4_102_444_800.0
MIN_LEASE_TTL_S = 0.1
#: A default unique key: ``<name>:<sha256 hex>`` (``unique_key_of``).
MAX_UNIQUE_KEY_LEN = MAX_NAME_LEN + 1 + 64
#: A bulk operation's id: a UUID, or an Idempotency-Key of 1-100 characters.
MAX_OPERATION_ID_LEN = 100
#: Who did something, as stores record it (``operator:<name>``, a worker id,
#: a lock owner): every actor column is this wide.
MAX_ACTOR_LEN = 200
#: An operator's name (console user, API token name, the embedding hook's
#: name): ``operator:<name>#<8 hex>`` (a recovery run's owner) fits MAX_ACTOR_LEN.
MAX_OPERATOR_NAME_LEN = 100


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
    #: Flow control (store/flow_rules.py): the partition key of per-key limits; the
    #: ids of jobs this one waits for (Scheduled with no due time until the
    #: last finishes); what a failed or canceled parent does ("cancel", the
    #: default, or "run"); the batch it belongs to (set by ``create_batch``).
    limit_key: str | None = None
    depends_on: tuple[str, ...] | None = None
    on_parent_failure: str | None = None
    batch_id: str | None = None
    #: Time on enqueue: ``run_at``, the earliest start instead of ``delay_s``;
    #: ``expires_at``, or ``expires_in_s`` seconds after the store's clock at
    #: enqueue: a job not started by then is never run (a claim that reaches
    #: it ends it Canceled, error type Expired: lifecycle.Operation.EXPIRE).
    #: Times are aware datetimes or epoch seconds (``validate_spec`` makes
    #: them epoch seconds); the store's clock decides (``resolve_times``).
    run_at: float | datetime | None = None
    expires_at: float | datetime | None = None
    expires_in_s: float | None = None

    @property
    def uses_flow(self) -> bool:
        """True when the spec needs the store's flow control."""
        return bool(self.limit_key or self.depends_on or self.on_parent_failure or self.batch_id)

    @property
    def needs_clock(self) -> bool:
        """True when enqueue must read the store's clock first (``resolve_times``)."""
        return self.run_at is not None or self.expires_in_s is not None


#: What a NUL becomes in text written for people (U+FFFD REPLACEMENT CHARACTER).
NUL_REPLACEMENT = "\ufffd"


#: A NUL in JSON text: the escape ``\\u0000`` after an even number of
#: backslashes (after an odd number it is the six characters ``\\u0000``).
_JSON_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")


def refuse_nul(fld: str, encoded: str | bytes | None) -> None:
    """Raise ValidationError naming ``fld`` when the JSON text ``encoded``
    (orjson's) holds a NUL, in a key or a value."""
    if encoded is None:
        return
    raw = encoded.encode() if isinstance(encoded, str) else encoded
    if b"\\u0000" in raw and _JSON_NUL.search(raw):
        raise ValidationError(fld, "must not contain NUL characters")


def scrub_nul(value: Any) -> Any:
    """``value`` with each NUL in its texts (dict keys included, nested)
    replaced by NUL_REPLACEMENT; other values unchanged."""
    if isinstance(value, str):
        return value.replace("\x00", NUL_REPLACEMENT) if "\x00" in value else value
    if isinstance(value, dict):
        return {scrub_nul(k): scrub_nul(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_nul(v) for v in value]
    return value


def clean_error(error: Any) -> dict[str, Any]:
    """A handler's error ``{type, message, traceback}`` as stores write it:
    NULs replaced (``scrub_nul``). Raises ValidationError naming ``error``
    when it is not a JSON-serialisable dict."""
    if not isinstance(error, dict):
        raise ValidationError("error", "must be an object {type, message, traceback}")
    cleaned = scrub_nul(error)
    try:
        orjson.dumps(cleaned)
    except TypeError as exc:
        raise ValidationError("error", f"must be JSON-serialisable ({exc})") from None
    return cleaned


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


def _epoch(fld: str, value: float | datetime | None) -> float | None:
    """``value`` as epoch seconds: an aware datetime, or a finite number within
    [0, MAX_EPOCH_S]. Raises ValidationError naming ``fld`` (a naive datetime
    too: which clock it means is a guess)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValidationError(fld, "must have a UTC offset (an aware datetime)")
        value = value.timestamp()
    _finite(fld, value, 0.0, MAX_EPOCH_S)
    return float(value)


def _check_times(spec: JobSpec) -> JobSpec:
    """The time options checked, ``run_at`` and ``expires_at`` as epoch
    seconds. Raises ValidationError naming the field."""
    run_at, expires_at = _epoch("run_at", spec.run_at), _epoch("expires_at", spec.expires_at)
    _finite("expires_in_s", spec.expires_in_s, 0.001, MAX_DELAY_S)
    if run_at is not None and spec.delay_s:
        raise ValidationError("run_at", "cannot be combined with delay_s")
    if expires_at is not None and spec.expires_in_s is not None:
        raise ValidationError("expires_in_s", "cannot be combined with expires_at")
    if run_at is not None and expires_at is not None and expires_at <= run_at:
        raise ValidationError("expires_at", "must be after run_at")
    if spec.expires_in_s is not None and spec.expires_in_s <= spec.delay_s:
        raise ValidationError("expires_in_s", "must be more than delay_s")
    if run_at is None and expires_at is None:
        return spec
    return replace(spec, run_at=run_at, expires_at=expires_at)


def resolve_times(specs: Sequence[JobSpec], now: Callable[[], float]) -> list[JobSpec]:
    """Checked specs as a store writes them: ``run_at`` made ``delay_s``
    (seconds from the store's clock, 0 when it has passed) and
    ``expires_in_s`` made ``expires_at`` (epoch seconds). ``now`` (the
    store's clock, epoch seconds) is called once, and only when a spec needs
    it. Raises ValidationError naming ``expires_at`` when a job would expire
    before its run time (``delay_s`` with an absolute ``expires_at``) and
    ``run_at`` when it is more than MAX_DELAY_S away."""
    if not any(s.needs_clock or s.expires_at is not None for s in specs):
        return list(specs)
    clock = now() if any(s.needs_clock or s.delay_s for s in specs) else 0.0
    out = []
    for spec in specs:
        delay = spec.delay_s if spec.run_at is None else max(0.0, float(spec.run_at) - clock)
        if delay > MAX_DELAY_S:
            raise ValidationError("run_at", f"must be at most {MAX_DELAY_S:g} seconds away")
        expires = spec.expires_at if spec.expires_in_s is None else clock + spec.expires_in_s
        if expires is not None and spec.delay_s and float(expires) <= clock + delay:
            raise ValidationError("expires_at", "must be after the job's run time (delay_s)")
        out.append(replace(spec, delay_s=delay, run_at=None, expires_at=expires, expires_in_s=None))
    return out


def check_queue_name(queue: str) -> str:
    """``queue`` when it is a queue name enqueue would take (1..MAX_QUEUE_LEN
    characters, not blank, no NUL). Raises ValidationError naming ``queue``."""
    _text("queue", queue, MAX_QUEUE_LEN, True)
    if "\x00" in queue:
        raise ValidationError("queue", "must not contain NUL characters")
    return queue


def check_actor(actor: str) -> str:
    """``actor`` when a store can record it (text of 1..MAX_ACTOR_LEN
    characters, no NUL). Raises ValidationError naming ``actor``."""
    _text("actor", actor, MAX_ACTOR_LEN, True)
    if "\x00" in actor:
        raise ValidationError("actor", "must not contain NUL characters")
    return actor


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
    for fld in ("name", "queue", "idempotency_key", "unique_key", "limit_key"):
        if "\x00" in (getattr(spec, fld) or ""):
            raise ValidationError(fld, "must not contain NUL characters")
    for fld in ("payload", "headers", "route_params", "query_params"):
        try:
            encoded = orjson.dumps(getattr(spec, fld))
        except TypeError as exc:
            raise ValidationError(fld, f"must be JSON-serialisable ({exc})") from None
        refuse_nul(fld, encoded)
    if spec.uses_flow and (spec.unique_key is not None or spec.unique_for is not None):
        # One rule for every store: a unique job's check is not part of the
        # flow enqueue (limits, parents, batches), so the two are refused together.
        fld = "unique_for" if spec.unique_for is not None else "unique_key"
        raise ValidationError(fld, "cannot be combined with depends_on, limit_key or a batch")
    return _check_times(spec)


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
