"""The side-by-side table: samples by (metric, system), ratios to the reference
peer of each metric, and the speed targets with a verdict.

Every ratio is a ratio of medians over the runs of this one invocation. The
reference of a metric: huey for single enqueue and latency, rq's
``enqueue_many`` for bulk enqueue, the fastest Redis peer (by median) for a
Redis drain, procrastinate for a PostgreSQL drain, Leasehold on Redis for
Leasehold's PostgreSQL latency p50. Leasehold on SQLite runs the drain
alone, for its worker RSS (no peer of it is measured).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from bench.report import fmt

LH_REDIS, LH_PG, LH_SQLITE = "leasehold-redis", "leasehold-postgresql", "leasehold-sqlite"
#: Drains of Leasehold with the features off are shown under this suffix.
PLAIN = " (plain)"
REDIS_PEERS = ("huey", "dramatiq", "celery", "rq", "rq-fork", "arq")
PG_PEERS = ("procrastinate",)
#: (metric, unit, higher is better) in table order.
METRICS = [
    ("enqueue, single", "jobs/s", True),
    ("enqueue, bulk", "jobs/s", True),
    ("drain", "jobs/s", True),
    ("latency p50", "ms", False),
    ("latency p99", "ms", False),
    ("worker CPU per job", "µs", False),
    ("store server CPU per job", "µs", False),
    ("worker peak RSS", "MB", False),
]


@dataclass(frozen=True)
class Target:
    """A speed target: ``system``'s median of ``metric`` against ``factor`` × the
    reference's (or against ``bound`` in the metric's unit)."""

    metric: str
    system: str
    factor: float | None = None
    bound: float | None = None


#: The speed targets of the side-by-side run: a ratio to the reference of the
#: metric (``Results.reference``), or a bound. The drain targets are Leasehold
#: with every feature on; the worker RSS holds on every store, plain or not.
TARGETS = [
    Target("drain", LH_REDIS, factor=2.0),
    Target("drain", LH_PG, factor=2.0),
    Target("enqueue, single", LH_REDIS, factor=0.75),
    Target("enqueue, bulk", LH_REDIS, factor=2.0),
    Target("latency p50", LH_REDIS, factor=1.5),
    Target("latency p99", LH_REDIS, factor=2.0),
    Target("latency p50", LH_PG, factor=2.0),
    *(
        Target("worker peak RSS", system + plain, bound=60.0)
        for system in (LH_REDIS, LH_PG, LH_SQLITE)
        for plain in ("", PLAIN)
    ),
]


class Results:
    """Samples by (metric, system); the configuration and notes of each system."""

    def __init__(self) -> None:
        self.samples: dict[tuple[str, str], list[float]] = {}
        self.config: dict[tuple[str, str], str] = {}
        self.errors: dict[tuple[str, str], str] = {}
        self.systems: list[str] = []

    def add(self, metric: str, system: str, value: float, config: str) -> None:
        if system not in self.systems:
            self.systems.append(system)
        self.samples.setdefault((metric, system), []).append(value)
        self.config[(metric, system)] = config

    def error(self, metric: str, system: str, text: str) -> None:
        if system not in self.systems:
            self.systems.append(system)
        self.errors[(metric, system)] = text

    def median(self, metric: str, system: str) -> float | None:
        values = self.samples.get((metric, system))
        return statistics.median(values) if values else None

    def reference(self, metric: str, system: str) -> str | None:
        """The system ``system``'s figure of ``metric`` is compared with."""
        if metric in ("enqueue, single", "latency p99"):
            return "huey"
        if metric == "latency p50":
            return LH_REDIS if system == LH_PG else "huey"
        if metric == "enqueue, bulk":
            return "rq"
        if metric == "drain":
            if system.startswith(LH_SQLITE):
                return None
            peers = PG_PEERS if "postgresql" in system or system in PG_PEERS else REDIS_PEERS
            medians = {p: m for p in peers if (m := self.median("drain", p)) is not None}
            return max(medians, key=medians.__getitem__) if medians else peers[0]
        return None


def _verdict(res: Results, target: Target, unit: str, higher: bool) -> tuple[str, str, str]:
    """(target text, met?, the figures it was decided on) of one target."""
    mine = res.median(target.metric, target.system)
    sign = "≥" if higher else "≤"
    if target.bound is not None:
        text = f"{sign} {fmt(target.bound, unit)} {unit}"
        if mine is None:
            return text, "not run", ""
        ok = mine >= target.bound if higher else mine <= target.bound
        return text, "yes" if ok else "NO", f"{fmt(mine, unit)} {unit}"
    ref = res.reference(target.metric, target.system)
    text = f"{sign} {target.factor:g}× {ref}"
    theirs = res.median(target.metric, ref) if ref else None
    if mine is None or theirs is None or theirs == 0:
        return text, "not run", ""
    ratio = mine / theirs
    ok = ratio >= target.factor if higher else ratio <= target.factor
    return text, "yes" if ok else "NO", f"{ratio:.2f}× ({fmt(mine, unit)} / {fmt(theirs, unit)} {unit})"


HEADINGS = ["metric", "system", "configuration", "median", "min–max (runs)", "ratio", "target", "met?"]
RIGHT = {3, 4, 5}


def rows(res: Results) -> list[list[str]]:
    out = []
    targets = {(t.metric, t.system): t for t in TARGETS}
    for metric, unit, higher in METRICS:
        for system in res.systems:
            key = (metric, system)
            if key not in res.samples and key not in res.errors:
                continue
            values = res.samples.get(key, [])
            if key in res.errors and not values:
                median = spread = "error"
            else:
                median = f"{fmt(statistics.median(values), unit)} {unit}"
                spread = f"{fmt(min(values), unit)}–{fmt(max(values), unit)} ({len(values)})"
            ref = res.reference(metric, system)
            mine, theirs = res.median(metric, system), res.median(metric, ref) if ref else None
            ratio = f"{mine / theirs:.2f}× {ref}" if ref and ref != system and mine and theirs else "—"
            target, met, _ = _verdict(res, targets[key], unit, higher) if key in targets else ("—", "—", "")
            out.append([metric, system, res.config.get(key, ""), median, spread, ratio, target, met])
    return out


def table(res: Results, extra: list[list[str]] = ()) -> str:
    """The results as an aligned Markdown table; ``extra`` rows (8 cells) at the end."""
    body = rows(res) + list(extra)
    widths = [max(len(r[i]) for r in [HEADINGS, *body]) for i in range(len(HEADINGS))]

    def line(cells: list[str]) -> str:
        pairs = enumerate(zip(cells, widths, strict=True))
        cells = [c.rjust(w) if i in RIGHT else c.ljust(w) for i, (c, w) in pairs]
        return "| " + " | ".join(cells) + " |"

    rule = "|" + "|".join(
        ("-" * (w + 1) + ":") if i in RIGHT else "-" * (w + 2) for i, w in enumerate(widths)
    )
    out = [line(HEADINGS), rule + "|", *(line(r) for r in body)]
    notes = [f"{system} {metric}: {text}" for (metric, system), text in res.errors.items()]
    if notes:
        out += ["", *[f"error: {n}" for n in notes]]
    return "\n".join(out)


def verdicts(res: Results) -> list[tuple[Target, str, str, str]]:
    """Each speed target this run measured: (target, its text, yes / NO / not run,
    the figures it was decided on)."""
    units = {m: (u, h) for m, u, h in METRICS}
    out = []
    for t in TARGETS:
        if t.system in res.systems:
            text, met, figures = _verdict(res, t, *units[t.metric])
            out.append((t, text, met, figures))
    return out
