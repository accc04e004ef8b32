"""Counts of the Redis store (a mixin of ``RedisStore``): the history
buckets (read, rolled up and trimmed) and the counter rows, which hold no
status counts and no totals of a history kind's events; those are counted
from what is already written (docs/architecture.md, Redis key schema):

* jobs by status and queue: ZCARD of the status's listing zset of each queue
  of ``queue_names``, and the leases zset for InProgress (lua/counts.lua);
* the total of a kind of HISTORY_KINDS: the sum of its per-queue totals
  ``q:<kind>:<queue>``, plus the ``b:<kind>`` an upgraded store keeps of
  the events counted before those totals existed (store/redis/upgrade.py);
* history buckets wider than the first width of HISTORY_WIDTHS: the narrow
  buckets' sums, rolled up by trim_history once a wide bucket has ended and
  at read time for the rest (the rule of store/counters.py, "roll-up", as
  lua/trim_history.lua and lua/history.lua apply it).

Round trips: counters 2 (one pipeline of the counters hash, one function);
history 1; trim_history 1 per TRIM_BATCH fields or wide buckets of the
widest backlog.
"""

from __future__ import annotations

from collections.abc import Iterable

from store.counters import (
    BEFORE_PREFIX,
    HISTORY_KINDS,
    HISTORY_WIDTHS,
    NARROW,
    bucket_of,
    event_key,
    status_key,
)
from store.errors import ValidationError
from store.handler_metrics import MINUTE_S, RETENTION_S, minute_of
from store.lifecycle import JobStatus
from store.parts import Part
from store.redis.keys import parse_history_field
from store.redis.plumbing import codes

#: Most history fields one trim_history call removes per width (and most wide buckets it rolls up).
TRIM_BATCH = 1000
#: Statuses counted from their listing zsets by queue (InProgress: from the leases zset).
LISTED = codes(sorted(s for s in JobStatus if s is not JobStatus.InProgress))

# NARROW is the width the functions write (lib/counts.lua flush_counts); the
# others are its roll-ups, by the rule of store/counters.py ("roll-up").
assert next(iter(HISTORY_WIDTHS)) == NARROW, "lua/trim_history.lua takes the narrowest width first"


class RedisHistoryPart(Part):
    """history, trim_history and the counter rows of SharedStore's counts."""

    def _counter_rows(self) -> Iterable[tuple[str, int | str]]:
        """The counters hash (``e:`` and ``q:`` totals, store/counters.py)
        with ``s:<status>:<queue>`` rows counted by lua/counts.lua. A
        HISTORY_KINDS kind's ``e:`` row is its ``b:`` events (counted before
        the ``q:`` totals existed), so its total is ``e:`` plus its ``q:``
        totals, as on every store (counters.derived_event_totals)."""
        [stored] = self._pipe(lambda p: p.hgetall(self.keys.counters))
        rows = self._eval(self._lua.counts, self._route, [LISTED, int(JobStatus.InProgress)])
        before = {event_key(kind): int(stored.get(f"{BEFORE_PREFIX}{kind}", 0)) for kind in HISTORY_KINDS}
        out: dict[str, int | str] = {k: v for k, v in stored.items() if k not in before}
        out.update({key: n for key, n in before.items() if n})
        for i in range(0, len(rows), 3):
            out[status_key(int(rows[i]), rows[i + 1])] = int(rows[i + 2])
        return out.items()

    def history(self, width_s: int, since: float, queue: str | None = None) -> dict[str, dict[float, int]]:
        """One function call (lua/history.lua): the width's fields with a
        bucket start >= ``since`` and their counts, read atomically with the
        narrow fields not rolled up yet, summed here per bucket and kind over
        every queue or the one named. Raises ValidationError for a width not
        in HISTORY_WIDTHS."""
        if width_s not in HISTORY_WIDTHS:
            raise ValidationError("width", f"must be one of {sorted(HISTORY_WIDTHS)}")
        fields, counts = self._eval(self._lua.history, self._route, [width_s, NARROW, repr(float(since))])
        out: dict[str, dict[float, int]] = {}
        for field, n in zip(fields, counts, strict=True):
            bucket, q, kind = parse_history_field(field)
            if queue is not None and q != queue:
                continue
            buckets = out.setdefault(kind, {})
            start = bucket_of(bucket, width_s)
            buckets[start] = buckets.get(start, 0) + int(n)
        return out

    def handler_minutes(self, name: str, since: float) -> dict[int, dict[str, int]]:
        """One pipeline: HGETALL of the handler's minute hashes from ``since``
        to the store's now (at most a week of them, RETENTION_S); they expire
        by themselves (lib/handler_minutes.lua), so trim_history leaves them."""
        first, last = minute_of(max(since, self.now() - RETENTION_S)), minute_of(self.now())
        minutes = range(first, last + MINUTE_S, MINUTE_S)
        found = self._pipe(lambda p: [p.hgetall(self.keys.handler_minute(m, name)) for m in minutes])
        return {m: {f: int(n) for f, n in h.items()} for m, h in zip(minutes, found, strict=True) if h}

    def trim_history(self) -> int:
        """lua/trim_history.lua until no width had more: roll ended wide
        buckets up, then drop fields past their width's retention (TRIM_BATCH
        of each a call). Returns the fields dropped."""
        args = [self._offset(), TRIM_BATCH, *(x for width in HISTORY_WIDTHS.items() for x in width)]
        removed = 0
        while True:
            *counts, more = self._eval(self._lua.trim_history, self._route, args)
            removed += sum(counts)
            if max(counts, default=0) < TRIM_BATCH and not more:
                return removed
