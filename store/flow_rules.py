"""Flow control decisions: queue limits (concurrency, rate) and job
dependencies. Pure: no I/O, no clock; every store reads the limits and the
usage it keeps, asks this module what to do, and makes the answer atomic in
its own engine (the SQL store inside its claim and ack transactions; the
Redis store compiles the same rules into its functions library).

Rate limits use a sliding window: a queue (or a ``limit_key`` of it) may start
at most ``limit`` jobs in any ``period_s`` seconds, counted from the start
times of the jobs themselves. A fixed window would let ``2 * limit`` jobs
start across a window boundary, which is exactly what a provider that allows
"10 calls a second" rejects.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from store.errors import ValidationError
from store.lifecycle import JobStatus

#: ``due_at`` of a job waiting for its parents: never due by time (its ack'd
#: parents make it Queued). Epoch seconds, year ~33,000.
WAITING_DUE_AT: Final[float] = 1.0e12
#: The most parents a job may wait for.
MAX_PARENTS: Final[int] = 10_000
#: Limits and periods accepted (the API checks the same numbers).
MAX_LIMIT: Final[int] = 1_000_000
MIN_PERIOD_S: Final[float] = 0.001
MAX_PERIOD_S: Final[float] = 7 * 24 * 3600.0
#: The limit kinds as ``/metrics`` and the console name them.
LIMIT_KINDS: Final[tuple[str, ...]] = ("concurrency", "per_key_concurrency", "rate", "per_key_rate")


class ParentFailure(enum.StrEnum):
    """What a failed or canceled parent does to a waiting child."""

    CANCEL = "cancel"  # the child and its own dependents are canceled, with the reason
    RUN = "run"  # the parent counts as finished; the child runs when all have


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``limit`` starts in any ``period_s`` seconds: ``limit`` an
    integer in [1, MAX_LIMIT], ``period_s`` finite seconds in [MIN_PERIOD_S,
    MAX_PERIOD_S]. Raises ValidationError (a ValueError) naming ``rate.limit``
    or ``rate.period_s`` otherwise."""

    limit: int
    period_s: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "limit", _count("rate.limit", self.limit, required=True))
        object.__setattr__(self, "period_s", _period("rate.period_s", self.period_s))

    def to_json(self) -> dict[str, Any]:
        return {"limit": self.limit, "period_s": self.period_s}


@dataclass(frozen=True, slots=True)
class QueueLimits:
    """A queue's limits; None is no limit of that kind.

    Every door (the API, the console's form, the command, Python) builds one
    of these, so one rule checks them all: each count an integer in [1,
    MAX_LIMIT], each rate a ``Rate``. Raises ValidationError (a ValueError)
    naming the field. ``invalid`` is set only by ``stored_limits``: what of
    the stored limits did not pass that rule and is not applied."""

    concurrency: int | None = None
    per_key_concurrency: int | None = None
    rate: Rate | None = None
    per_key_rate: Rate | None = None
    invalid: str | None = None

    def __post_init__(self) -> None:
        for name in ("concurrency", "per_key_concurrency"):
            object.__setattr__(self, name, _count(name, getattr(self, name)))
        for name in ("rate", "per_key_rate"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Rate):
                raise ValidationError(name, "must be a Rate or None")

    @property
    def any(self) -> bool:
        return any(
            v is not None for v in (self.concurrency, self.per_key_concurrency, self.rate, self.per_key_rate)
        )

    def to_json(self) -> dict[str, Any]:
        """``{"concurrency", "per_key_concurrency", "rate", "per_key_rate"}``,
        each rate ``{"limit", "period_s"}`` or None (``invalid`` is not part
        of it: a store writes this)."""
        return {
            "concurrency": self.concurrency,
            "per_key_concurrency": self.per_key_concurrency,
            "rate": self.rate.to_json() if self.rate else None,
            "per_key_rate": self.per_key_rate.to_json() if self.per_key_rate else None,
        }

    def values(self) -> dict[str, float | None]:
        """Each kind's number (a rate's ``limit``), for metrics."""
        return {
            "concurrency": self.concurrency,
            "per_key_concurrency": self.per_key_concurrency,
            "rate": self.rate.limit if self.rate else None,
            "per_key_rate": self.per_key_rate.limit if self.per_key_rate else None,
        }


def _count(fld: str, value: Any, required: bool = False) -> int | None:
    """``value`` as a count: an integer (JSON's 5.0 is 5) in [1, MAX_LIMIT]."""
    if value is None and not required:
        return None
    if isinstance(value, float) and value.is_integer():  # JSON's 5.0 is the integer 5
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(fld, "must be an integer" if required else "must be an integer or null")
    if not 1 <= value <= MAX_LIMIT:
        raise ValidationError(fld, f"must be within [1, {MAX_LIMIT}]")
    return value


def _period(fld: str, value: Any) -> float:
    """``value`` as a rate's period: finite seconds in [MIN_PERIOD_S, MAX_PERIOD_S]."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(fld, "must be a number of seconds")
    try:
        period = float(value)
    except OverflowError:  # an int too large for a float
        period = math.inf
    if not math.isfinite(period) or not MIN_PERIOD_S <= period <= MAX_PERIOD_S:
        raise ValidationError(fld, f"must be within [{MIN_PERIOD_S:g}, {MAX_PERIOD_S:g}] seconds")
    return period


def _rate(fld: str, value: Any) -> Rate | None:
    if value is None:
        return None
    if isinstance(value, Rate):
        value = value.to_json()
    if not isinstance(value, Mapping) or set(value) - {"limit", "period_s"}:
        raise ValidationError(fld, 'must be {"limit": N, "period_s": S} or null')
    if value.get("limit") is None:
        raise ValidationError(f"{fld}.limit", "is required")
    limit = _count(f"{fld}.limit", value["limit"], required=True)
    return Rate(limit, _period(f"{fld}.period_s", value.get("period_s")))  # type: ignore[arg-type]


def parse_limits(body: Mapping[str, Any], base: QueueLimits | None = None) -> QueueLimits:
    """Limits from a JSON body: a key present sets (null clears) that limit,
    a key absent keeps ``base``'s. Raises ValidationError naming the field."""
    unknown = set(body) - set(LIMIT_KINDS)
    if unknown:
        raise ValidationError(sorted(unknown)[0], f"unknown limit; expected one of {', '.join(LIMIT_KINDS)}")
    base = base or QueueLimits()
    return QueueLimits(
        concurrency=_count("concurrency", body["concurrency"]) if "concurrency" in body else base.concurrency,
        per_key_concurrency=(
            _count("per_key_concurrency", body["per_key_concurrency"])
            if "per_key_concurrency" in body
            else base.per_key_concurrency
        ),
        rate=_rate("rate", body["rate"]) if "rate" in body else base.rate,
        per_key_rate=_rate("per_key_rate", body["per_key_rate"])
        if "per_key_rate" in body
        else base.per_key_rate,
    )


#: A count as text: ASCII digits only (``str.isdigit`` also takes ``²``), and
#: no more of them than MAX_LIMIT has (int() of 5,000 digits raises).
_COUNT_TEXT = re.compile(rf"[0-9]{{1,{len(str(MAX_LIMIT))}}}")
#: A period as text: a plain decimal number of seconds.
_PERIOD_TEXT = re.compile(r"[0-9]{1,12}(\.[0-9]{1,9})?|\.[0-9]{1,9}")


def parse_count_text(fld: str, text: str) -> int:
    """A count typed by a person (the console's form, the command's flags):
    ASCII digits of an integer in [1, MAX_LIMIT]. Raises ValidationError."""
    text = text.strip()
    if not _COUNT_TEXT.fullmatch(text):
        raise ValidationError(fld, f"must be a whole number in [1, {MAX_LIMIT}]")
    return _count(fld, int(text), required=True)  # type: ignore[return-value]


def parse_rate_text(fld: str, text: str) -> Rate:
    """``"N/S"`` (N starts per S seconds; ``"N"`` alone is per second) as a
    Rate, N by ``parse_count_text``. Raises ValidationError naming ``fld``."""
    limit, slash, period = text.strip().partition("/")
    period = period.strip()
    if not _COUNT_TEXT.fullmatch(limit.strip()) or (slash and not _PERIOD_TEXT.fullmatch(period)):
        raise ValidationError(fld, "must be N/S, e.g. 10/1 for 10 starts a second")
    return _rate(fld, {"limit": int(limit), "period_s": float(period or 1)})  # type: ignore[return-value]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def stored_limits(stored: Any) -> QueueLimits:
    """A queue's limits as a store reads them back (the JSON shape of
    ``QueueLimits.to_json``; missing keys are no limit). Never raises: a kind
    whose stored value does not pass the rule above (written by an older
    version, or by hand) is not applied and is named in ``invalid``, so it
    is reported for its own queue and never breaks a listing of all."""
    if not isinstance(stored, Mapping):
        return QueueLimits(invalid=f"stored limits {_shown(stored)} are not an object; none applied")
    kept: dict[str, Any] = {}
    problems = [f"{k}: unknown limit" for k in sorted(map(str, set(stored) - set(LIMIT_KINDS)))]
    for kind in LIMIT_KINDS:
        try:
            kept[kind] = parse_limits({kind: stored.get(kind)}).to_json()[kind]
        except ValidationError as exc:
            problems.append(f"{exc} (stored {_shown(stored.get(kind))})")
    kept = {k: v for k, v in kept.items() if v is not None}
    invalid = "; ".join(problems) + "; not applied" if problems else None
    ok = parse_limits(kept)
    return QueueLimits(ok.concurrency, ok.per_key_concurrency, ok.rate, ok.per_key_rate, invalid)


def stored_limits_json(text: str) -> QueueLimits:
    """``stored_limits`` of JSON text ('' is none). Never raises."""
    if not text:
        return QueueLimits()
    try:
        return stored_limits(orjson.loads(text))
    except orjson.JSONDecodeError as exc:
        return QueueLimits(invalid=f"stored limits {_shown(text)} are not JSON ({exc}); none applied")


@dataclass(slots=True)
class Usage:
    """What a queue uses of its limits at the store's ``now``: InProgress jobs,
    in all and by limit key; starts in the rate window and the oldest of them
    (queue-wide, and by limit key in the per-key window)."""

    running: int = 0
    running_by_key: dict[str, int] = field(default_factory=dict)
    starts: int = 0
    first_start: float | None = None
    starts_by_key: dict[str, tuple[int, float]] = field(default_factory=dict)

    def in_use(self, limits: QueueLimits) -> dict[str, int]:
        """Each set limit's use: running, running of the busiest key, starts
        in the window, starts of the busiest key in its window."""
        out: dict[str, int] = {}
        if limits.concurrency is not None:
            out["concurrency"] = self.running
        if limits.per_key_concurrency is not None:
            out["per_key_concurrency"] = max(self.running_by_key.values(), default=0)
        if limits.rate is not None:
            out["rate"] = self.starts
        if limits.per_key_rate is not None:
            out["per_key_rate"] = max((n for n, _ in self.starts_by_key.values()), default=0)
        return out


@dataclass(frozen=True, slots=True)
class Admission:
    """A claim's decision: the candidates to lease (ids, in claim order) and,
    when a rate limit held one, the seconds until a start is allowed again."""

    leased: list[str]
    retry_after_s: float | None = None


def hold(key: str | None, limits: QueueLimits, usage: Usage, now: float) -> tuple[str, str] | None:
    """The limit that holds a job of ``key`` now, as ``(kind, explanation)``,
    or None when it may start. The one check every claim and the diagnosis use."""
    if limits.concurrency is not None and usage.running >= limits.concurrency:
        return "concurrency", f"concurrency limit {limits.concurrency}: {usage.running} running"
    if key is not None and limits.per_key_concurrency is not None:
        n = usage.running_by_key.get(key, 0)
        if n >= limits.per_key_concurrency:
            return "per_key_concurrency", (
                f"per-key concurrency limit {limits.per_key_concurrency}: {n} running with limit key {key!r}"
            )
    if limits.rate is not None and usage.starts >= limits.rate.limit:
        r = limits.rate
        return "rate", f"rate limit {r.limit}/{r.period_s:g}s: {usage.starts} started in the window"
    if key is not None and limits.per_key_rate is not None:
        n = usage.starts_by_key.get(key, (0, now))[0]
        if n >= limits.per_key_rate.limit:
            r = limits.per_key_rate
            return "per_key_rate", (
                f"per-key rate limit {r.limit}/{r.period_s:g}s: "
                f"{n} started with limit key {key!r} in the window"
            )
    return None


def _reopens(first: float | None, rate: Rate, now: float) -> float:
    """Seconds until a full window's oldest start leaves it. Exact while the
    window holds at most ``rate.limit`` starts (admission keeps it so); after
    an operator lowered the limit it is the earliest moment to look again."""
    return 0.0 if first is None else max(0.0, first + rate.period_s - now)


def admit(
    candidates: Sequence[tuple[str, str | None]], limits: QueueLimits, usage: Usage, now: float, wanted: int
) -> Admission:
    """Which due candidates (``(id, limit_key)`` in claim order) a claim leases:
    each in turn unless a limit holds it (``hold``), counting those admitted
    before it, at most ``wanted``. ``usage`` is updated with the admitted."""
    leased: list[str] = []
    retry: float | None = None
    for job_id, key in candidates:
        if len(leased) >= wanted:
            break
        held = hold(key, limits, usage, now)
        if held is not None:
            kind = held[0]
            if kind == "concurrency":
                break  # nothing else of the queue can start either
            if kind in ("rate", "per_key_rate"):
                rate = limits.rate if kind == "rate" else limits.per_key_rate
                first = (
                    usage.first_start if kind == "rate" else usage.starts_by_key.get(key or "", (0, now))[1]
                )
                assert rate is not None
                wait = _reopens(first, rate, now)
                retry = wait if retry is None else min(retry, wait)
                if kind == "rate":
                    break
            continue
        leased.append(job_id)
        usage.running += 1
        usage.starts += 1
        if usage.first_start is None:
            usage.first_start = now
        if key is not None:
            usage.running_by_key[key] = usage.running_by_key.get(key, 0) + 1
            n, first = usage.starts_by_key.get(key, (0, now))
            usage.starts_by_key[key] = (n + 1, first)
    return Admission(leased, retry)


def check_batch(specs: Sequence[Any], kind: str) -> None:
    """A batch or chain request's shape: ``kind`` one of ``batch``, ``chain``
    and at least one job. Raises ValidationError naming the field."""
    if kind not in ("batch", "chain"):
        raise ValidationError("kind", "must be 'batch' or 'chain'")
    if not specs:
        raise ValidationError("jobs", "name at least one job")


# ------------------------------------------------------------ dependencies
@dataclass(frozen=True, slots=True)
class ChildChange:
    """What a parent's end does to one waiting child: its count of unfinished
    parents after, and its new status (None: it keeps waiting)."""

    pending: int
    status: JobStatus | None
    reason: str | None = None


def child_status_at_enqueue(
    parents: Mapping[str, JobStatus], on_parent_failure: ParentFailure
) -> ChildChange:
    """A new child's status from its parents' current statuses: Canceled when
    a parent already failed or was canceled (with CANCEL), Queued when every
    parent has finished, else Scheduled, waiting for the unfinished ones."""
    pending = 0
    for parent_id, status in sorted(parents.items()):
        if status in (JobStatus.Failed, JobStatus.Canceled) and on_parent_failure is ParentFailure.CANCEL:
            return ChildChange(0, JobStatus.Canceled, f"parent {parent_id} is {status.name}")
        if status not in (JobStatus.Completed, JobStatus.Failed, JobStatus.Canceled):
            pending += 1
    return ChildChange(pending, JobStatus.Scheduled if pending else JobStatus.Queued)


def on_parent_finished(
    child_status: JobStatus,
    pending: int,
    parent_id: str,
    parent_status: JobStatus,
    on_parent_failure: ParentFailure,
) -> ChildChange | None:
    """A parent of a child ended ``parent_status`` (Completed, Failed or
    Canceled). None when the child no longer waits (an operator moved it);
    else its new pending count and status: Canceled (with the reason) by a
    failed or canceled parent under CANCEL, Queued by the last parent, else
    still Scheduled (status None)."""
    if child_status is not JobStatus.Scheduled or pending <= 0:
        return None
    left = pending - 1
    if parent_status is not JobStatus.Completed and on_parent_failure is ParentFailure.CANCEL:
        return ChildChange(left, JobStatus.Canceled, f"parent {parent_id} ended {parent_status.name}")
    return ChildChange(left, JobStatus.Queued if left == 0 else None)


#: Parent outcomes that release or cancel children.
FINISHED: Final[frozenset[JobStatus]] = frozenset({JobStatus.Completed, JobStatus.Failed, JobStatus.Canceled})
