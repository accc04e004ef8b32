"""Per-handler metrics: succeeded, failed and retried runs and run-time
percentiles per time bucket (``GET /api/handlers/<name>/metrics``, the
console's ``/handlers/<name>``), read from the minute buckets every store
writes in the same atomic unit as the outcome it counts.

A *minute bucket* of a handler is a small map of fields to counts, keyed by
the handler's name and the start of the minute (epoch seconds, the store's
clock) of the outcome. A field is an outcome's code and its run time's bin,
``<code><k>`` (``s-3``, ``f140``; the code alone when the run has no
start), so one outcome adds 1 to one field (one write a run):

* codes (CODES): ``s`` succeeded: acks (Operation.COMPLETE); ``f`` failed:
  handler failures that end the job Failed; ``r`` retried: handler failures
  that schedule a retry. A lease that expired (recovery) is no handler
  outcome and is not counted here (the queue history counts it as
  ``lease_expired``);
* ``k``: the bin of the run time (the outcome's stamp minus ``started_at``)
  in a log-bucketed histogram: DDSketch's logarithmic
  mapping (Masson, Rim, Lee, "DDSketch: a fast and fully-mergeable quantile
  sketch with relative-error guarantees", VLDB 2019): ``k = ceil(log(ms) /
  log(GAMMA))``, ``GAMMA = (1 + a) / (1 - a)``; a bin's value
  ``2 GAMMA^k / (GAMMA + 1)`` is within ``a`` = RELATIVE_ACCURACY of every
  run time in it. Bins are integers, so minutes (and stores) merge exactly by
  adding counts; k is clamped to [KEY_MIN, KEY_MAX] (run times below
  MIN_MS or above MAX_MS land in the end bins), so a bucket holds at most
  ``3 (KEY_MAX - KEY_MIN + 2)`` fields. The percentiles merge every
  outcome's runs.

The mapping is written once per language: ``run_key`` here (the SQL stores
bind its result; PostgreSQL's batch ack has its SQL twin,
``store/sql/handler_minutes.py``), ``run_key`` in
``store/redis/lua/lib/handler_minutes.lua``; ``tests/store/test_handler_metrics.py``
checks that they agree. Minute buckets are kept RETENTION_S (the widest
window plus a margin) and pruned by the store's history trim (maintenance).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from store.errors import ValidationError

#: Relative accuracy of the run-time percentiles (DDSketch's ``a``).
RELATIVE_ACCURACY = 0.02
#: DDSketch's gamma, the ratio of one bin's upper bound to the one below.
GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
#: Run times at or below this many milliseconds share the lowest bin.
MIN_MS = 0.1
#: Run times above this many milliseconds (one day) share the highest bin.
MAX_MS = 86_400_000.0
#: The lowest and highest bin.
KEY_MIN = math.ceil(math.log(MIN_MS) / math.log(GAMMA))
KEY_MAX = math.ceil(math.log(MAX_MS) / math.log(GAMMA))
#: The width of a minute bucket, seconds.
MINUTE_S = 60
#: How long minute buckets are kept, seconds: the widest window and a margin.
RETENTION_S = 7 * 86400 + 3600

SUCCEEDED, FAILED, RETRIED = "succeeded", "failed", "retried"
#: An outcome's code, the first letter of its fields.
CODES: dict[str, str] = {SUCCEEDED: "s", FAILED: "f", RETRIED: "r"}
_OUTCOME_OF = {code: outcome for outcome, code in CODES.items()}

#: Chart windows: name -> (length s, chart bucket width s); each chart bucket
#: sums whole minute buckets.
WINDOWS: dict[str, tuple[int, int]] = {
    "1h": (3600, 60),
    "24h": (86400, 900),
    "7d": (7 * 86400, 3600),
}


def run_key(run_ms: float) -> int:
    """The bin of a run time in milliseconds (clamped to [KEY_MIN, KEY_MAX])."""
    if run_ms <= MIN_MS:
        return KEY_MIN
    return max(KEY_MIN, min(KEY_MAX, math.ceil(math.log(run_ms) / math.log(GAMMA))))


def key_value(key: int) -> float:
    """A bin's representative run time, milliseconds (within RELATIVE_ACCURACY
    of every value in it)."""
    return 2.0 * GAMMA**key / (GAMMA + 1.0)


def minute_of(at_s: float) -> int:
    """The start (epoch s) of the minute bucket of an outcome stamped ``at_s``."""
    return int(at_s // MINUTE_S) * MINUTE_S


def field_of(outcome: str, run_s: float | None) -> str:
    """The field one outcome adds 1 to: its code, and its run-time bin when
    ``run_s`` (seconds) is known."""
    if run_s is None:
        return CODES[outcome]
    return f"{CODES[outcome]}{run_key(max(0.0, run_s) * 1000.0)}"


def tally(fields: Mapping[str, int]) -> tuple[Counter[str], dict[int, int]]:
    """Counts by outcome and the run-time histogram ``{bin: n}`` of a
    bucket's (or several merged buckets') fields."""
    outcomes: Counter[str] = Counter()
    bins: Counter[int] = Counter()
    for field, n in fields.items():
        outcome = _OUTCOME_OF.get(field[:1])
        if outcome is None:
            continue
        outcomes[outcome] += int(n)
        if len(field) > 1:
            bins[int(field[1:])] += int(n)
    return outcomes, dict(bins)


def percentile(bins: Mapping[int, int], q: float) -> float | None:
    """The nearest-rank ``q`` quantile (0 < q <= 1) of a histogram ``{bin:
    count}``, in milliseconds rounded to 3 decimals; None when empty."""
    total = sum(bins.values())
    if total <= 0:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for key in sorted(bins):
        seen += bins[key]
        if seen >= rank:
            return round(key_value(key), 3)
    return None  # pragma: no cover - seen reaches total


@dataclass(frozen=True, slots=True)
class Window:
    """A chart window: ``name`` (a WINDOWS key), its ``length_s`` and chart
    bucket ``width_s``, and the ``since`` (epoch s) of its first bucket."""

    name: str
    length_s: int
    width_s: int
    since: int

    @property
    def starts(self) -> list[int]:
        return list(range(self.since, self.since + self.length_s, self.width_s))


def window(name: str, now_s: float) -> Window:
    """The window ``name`` ending with the chart bucket that holds ``now_s``.
    Raises ValidationError (field ``window``) for a name not in WINDOWS."""
    if name not in WINDOWS:
        raise ValidationError("window", f"must be one of {', '.join(WINDOWS)}")
    length, width = WINDOWS[name]
    last = int(now_s // width) * width
    return Window(name, length, width, last + width - length)


def chart(minutes: Mapping[int, Mapping[str, int]], win: Window) -> list[dict[str, Any]]:
    """The chart buckets of ``win`` from minute buckets ``{minute start:
    {field: n}}``: counts summed exactly, bins merged, then the percentiles
    (None in a bucket without runs). Every bucket of the window is listed,
    oldest first."""
    counts: dict[int, Counter[str]] = {start: Counter() for start in win.starts}
    for minute, fields in minutes.items():
        start = int(minute // win.width_s) * win.width_s
        if start in counts:
            counts[start].update({f: int(n) for f, n in fields.items()})
    out = []
    for start, merged in counts.items():
        c, bins = tally(merged)
        out.append(
            {
                "start": start,
                SUCCEEDED: c[SUCCEEDED],
                FAILED: c[FAILED],
                RETRIED: c[RETRIED],
                "run_time_ms": {
                    "p50": percentile(bins, 0.50),
                    "p95": percentile(bins, 0.95),
                    "p99": percentile(bins, 0.99),
                },
            }
        )
    return out


def metrics(store: Any, name: str, window_name: str) -> dict[str, Any]:
    """``{"handler", "window", "buckets"}`` of handler ``name`` over
    ``window_name`` at the store's time (one read of its minute buckets,
    ``JobStore.handler_minutes``). Raises ValidationError for a bad window."""
    win = window(window_name, store.now())
    return {
        "handler": name,
        "window": win.name,
        "buckets": chart(store.handler_minutes(name, win.since), win),
    }
