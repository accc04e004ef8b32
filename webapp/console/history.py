"""History graphs of the overview and queue pages: throughput and failures
over the last hour, 24 hours or 7 days, from the store's time-bucketed counters.

One ``store.history`` call per page render (the chosen range): it returns
``{kind: {bucket start: n}}`` for the buckets that have events; everything
here is pure: the bins of a range, the zero-filled series and the geometry of
the server-rendered SVG (``templates/partials/history.html``; no JavaScript).

Bins are aligned to whole multiples of their width in store time (epoch
seconds, UTC), so the newest bin is the one still filling and a range covers
a little less than its nominal span: "last hour" is twelve 5-minute bins, the
first starting at most 60 min ago. Totals are the sums of the bins shown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from flask import url_for

from store.base import JobStore
from store.lifecycle import EventKind as E


@dataclass(frozen=True, slots=True)
class Range:
    """A graph range: ``bins`` bins of ``bin_s`` seconds, read from store
    buckets of ``width_s`` seconds (60 or 3600: ``counters.HISTORY_WIDTHS``)."""

    key: str
    label: str
    width_s: int
    bin_s: int
    bins: int
    #: A bin's width for people ("5 minutes").
    per: str
    #: strftime format of a bin's start in the table and the axis.
    fmt: str


RANGES: dict[str, Range] = {
    r.key: r
    for r in (
        Range("1h", "1 hour", 60, 300, 12, "5 minutes", "%H:%M"),
        Range("24h", "24 hours", 3600, 3600, 24, "hour", "%d %b %H:%M"),
        Range("7d", "7 days", 3600, 6 * 3600, 28, "6 hours", "%d %b %H:%M"),
    )
}
DEFAULT_RANGE = "1h"

#: (graph id, title, [(series key, label, event kinds summed)]).
GRAPHS: tuple[tuple[str, str, tuple[tuple[str, str, tuple[str, ...]], ...]], ...] = (
    (
        "throughput",
        "Throughput",
        (("completed", "Completed", (E.COMPLETED,)), ("enqueued", "Enqueued", (E.ENQUEUED,))),
    ),
    (
        "failures",
        "Failures",
        (
            ("failed", "Failed", (E.FAILED,)),
            ("lease_expired", "Leases expired", (E.LEASE_EXPIRED,)),
            ("retried", "Retries scheduled", (E.RETRY_SCHEDULED,)),
        ),
    ),
)

#: SVG user units: each bin is BIN_W wide; values span PLOT_H (PAD above and below).
BIN_W = 10
PLOT_H = 100
PAD = 4


def pick_range(key: str | None) -> Range:
    """The range named ``key`` (``1h``, ``24h``, ``7d``); the default for anything else."""
    return RANGES.get(key or "", RANGES[DEFAULT_RANGE])


def bin_starts(rng: Range, now_s: float) -> list[float]:
    """Start (epoch s) of each bin of ``rng``, oldest first, the last one holding ``now_s``."""
    last = (now_s // rng.bin_s) * rng.bin_s
    return [last - (rng.bins - 1 - i) * rng.bin_s for i in range(rng.bins)]


def zero_fill(buckets: Mapping[float, int], starts: Sequence[float], bin_s: int) -> list[int]:
    """Counts per bin of ``bin_s`` seconds starting at ``starts`` (evenly
    spaced, oldest first) from ``{bucket start: n}``: buckets summed into the
    bin that holds them, empty bins 0, buckets outside the bins ignored."""
    values = [0] * len(starts)
    if not starts:
        return values
    first = starts[0]
    for bucket, n in buckets.items():
        i = int((bucket - first) // bin_s)
        if 0 <= i < len(values):
            values[i] += int(n)
    return values


@dataclass(frozen=True, slots=True)
class Series:
    """One line of a graph: a value a bin; None where a bin has no value (a
    run time with no runs), where the line breaks rather than falls to 0."""

    key: str
    label: str
    values: list[int] | list[float | None]

    @property
    def total(self) -> int:
        return int(sum(v for v in self.values if v is not None))

    def segments(self, peak: float) -> list[str]:
        """SVG polyline points of the complete bins' values scaled to ``peak``
        (top of the plot), one polyline a run of bins with a value: the newest
        bin is still filling, so the line stops before it rather than
        dropping to its partial count (``filling``)."""
        out: list[list[str]] = [[]]
        for i, v in enumerate(self.values[:-1]):
            if v is None:
                out.append([])
                continue
            x, y = _xy(i, v, peak)
            out[-1].append(f"{x:g},{y:.1f}")
        return [" ".join(points) for points in out if points]

    def points(self, peak: float) -> str:
        """Every complete bin's point (``segments`` joined)."""
        return " ".join(self.segments(peak))

    def filling(self, peak: float) -> tuple[float, float] | None:
        """Where the newest bin's value so far sits: a dot, not a point of the
        line (None when it has no value)."""
        last = self.values[-1] if self.values else 0
        return None if last is None else _xy(len(self.values) - 1, last, peak)


def _xy(i: int, value: float, peak: float) -> tuple[float, float]:
    """SVG coordinates of bin ``i`` holding ``value`` in a plot whose top is ``peak``."""
    scale = (PLOT_H - 2 * PAD) / peak if peak else 0.0
    return i * BIN_W + BIN_W / 2, round(PLOT_H - PAD - value * scale, 1)


def _shown(value: float | None) -> str:
    """A bin's value in words: thousands separated, "—" for none."""
    return "—" if value is None else f"{value:,}"


@dataclass(frozen=True, slots=True)
class Graph:
    id: str
    title: str
    series: list[Series]
    labels: list[str]

    @property
    def peak(self) -> float:
        return max((max((v for v in s.values if v is not None), default=0) for s in self.series), default=0)

    @property
    def width(self) -> int:
        return len(self.labels) * BIN_W

    @property
    def rows(self) -> list[tuple[str, list[int]]]:
        """The table: each bin's label with every series' value."""
        return [(label, [s.values[i] for s in self.series]) for i, label in enumerate(self.labels)]

    @property
    def hovers(self) -> list[tuple[float, str]]:
        """Each bin's left edge (SVG units) and its values in words, shown on hover."""
        last = len(self.labels) - 1
        return [
            (
                i * BIN_W,
                f"{label}{' (still filling)' if i == last else ''}: "
                + ", ".join(f"{s.label} {_shown(s.values[i])}" for s in self.series),
            )
            for i, label in enumerate(self.labels)
        ]

    @property
    def summary(self) -> str:
        """The text alternative of the graph: totals and peak."""
        totals = ", ".join(f"{s.label.lower()} {s.total:,}" for s in self.series)
        return f"{self.title}: {totals}; busiest bin {self.peak:,}."


@dataclass(frozen=True, slots=True)
class History:
    range: Range
    since_s: float
    graphs: list[Graph]

    @property
    def since(self) -> datetime:
        return datetime.fromtimestamp(self.since_s, UTC)


def build(raw: Mapping[str, Mapping[float, int]], rng: Range, now_s: float) -> History:
    """The graphs of ``rng`` ending at ``now_s`` from ``store.history`` output."""
    starts = bin_starts(rng, now_s)
    labels = [datetime.fromtimestamp(s, UTC).strftime(rng.fmt) for s in starts]
    graphs = []
    for graph_id, title, series in GRAPHS:
        built = []
        for key, label, kinds in series:
            values = [0] * len(starts)
            for kind in kinds:
                for i, n in enumerate(zero_fill(raw.get(kind, {}), starts, rng.bin_s)):
                    values[i] += n
            built.append(Series(key, label, values))
        graphs.append(Graph(graph_id, title, built, labels))
    return History(rng, starts[0], graphs)


def links(endpoint: str, **values: str) -> list[tuple[str, str, str]]:
    """``(key, label, url)`` of each range for the range switch of a page."""
    return [(r.key, r.label, url_for(endpoint, range=r.key, **values)) for r in RANGES.values()]


def read(store: JobStore, now_s: float, range_key: str | None, queue: str | None = None) -> History:
    """One ``store.history`` call for the range named ``range_key``, of one queue or all."""
    rng = pick_range(range_key)
    since = bin_starts(rng, now_s)[0]
    return build(store.history(rng.width_s, since, queue), rng, now_s)
