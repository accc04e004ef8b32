"""The rows of the benchmark table: samples, target, verdict, formatting.

A Row holds the figures of one measurement repeated over runs; the table
shows their median and min–max, the target and whether the median meets it.
A row "at scale" carries the same row measured on an empty store as its
``baseline``; its target is to stay within SCALE_TOLERANCE of that median. A
row with a ``versus`` row and a ``factor`` is held to ``factor`` times that
row's median.
"""

from __future__ import annotations

import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

#: Largest change a figure may show when the store holds many finished jobs.
SCALE_TOLERANCE = 0.20
#: Units whose figures are better when higher (rates); every other unit is a cost.
HIGHER_IS_BETTER = {"jobs/s"}


def commit() -> str:
    """The checkout's commit for a benchmark header (``git describe --always
    --dirty``: a ``-dirty`` suffix when tracked files changed); "unknown"
    outside git."""
    try:
        return subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=Path(__file__).resolve().parent.parent,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def fmt(value: float, unit: str) -> str:
    """A figure in its unit's usual precision."""
    if unit in ("jobs/s", "B"):
        return f"{value:,.0f}"
    if unit in ("ms", "MB"):
        return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"
    return f"{value:,.2f}"


@dataclass
class Row:
    """One line of the table. ``key`` names the measurement (the same for a
    row and its ``scale`` twin); ``target``: the bound the median must meet
    (>= for rates, <= for costs), None when the issue states none."""

    metric: str
    store: str
    config: str
    unit: str
    key: str = ""
    scale: bool = False
    target: float | None = None
    baseline: Row | None = None
    versus: Row | None = None
    factor: float | None = None
    samples: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def higher_is_better(self) -> bool:
        return self.unit in HIGHER_IS_BETTER

    @property
    def median(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None

    def ratio(self) -> float | None:
        """This row's median over its baseline's (scale rows) or its ``versus`` row's."""
        other = self.baseline or self.versus
        base = other.median if other else None
        if base is None or self.median is None or base == 0:
            return None
        return self.median / base

    def met(self) -> bool | None:
        """Whether the median meets the target (None: no target, or no figure)."""
        if self.error or self.median is None:
            return None
        if self.scale:
            ratio = self.ratio()
            if ratio is None:
                return None
            return ratio >= 1 - SCALE_TOLERANCE if self.higher_is_better else ratio <= 1 + SCALE_TOLERANCE
        if self.versus is not None and self.factor is not None:
            ratio = self.ratio()
            if ratio is None:
                return None
            return ratio >= self.factor if self.higher_is_better else ratio <= self.factor
        if self.target is None:
            return None
        return self.median >= self.target if self.higher_is_better else self.median <= self.target

    def cells(self) -> list[str]:
        """metric, store, configuration, median, min–max, target, met?"""
        unit = f" {self.unit}"
        if self.scale:
            base = self.baseline.median if self.baseline else None
            sign = "≥" if self.higher_is_better else "≤"
            bound = 1 - SCALE_TOLERANCE if self.higher_is_better else 1 + SCALE_TOLERANCE
            target = f"{sign} {bound:.0%} of empty" + (f" ({fmt(base, self.unit)})" if base else "")
        elif self.versus is not None and self.factor is not None:
            sign = "≥" if self.higher_is_better else "≤"
            base = self.versus.median
            target = f"{sign} {self.factor:g}× {self.versus.store}" + (
                f" ({fmt(base, self.unit)}{unit})" if base is not None else ""
            )
        elif self.target is not None:
            target = f"{'≥' if self.higher_is_better else '≤'} {fmt(self.target, self.unit)}{unit}"
        else:
            target = "—"
        if self.error:
            median = spread = "error"
        elif self.samples:
            median = fmt(self.median, self.unit) + unit  # type: ignore[arg-type]
            lo, hi = min(self.samples), max(self.samples)
            spread = f"{fmt(lo, self.unit)}–{fmt(hi, self.unit)} ({len(self.samples)})"
        else:
            median = spread = "not run"
        met = self.met()
        has_target = self.scale or self.target is not None or self.factor is not None
        missing = "not run" if has_target else "—"
        verdict = "error" if self.error else {None: missing, True: "yes", False: "NO"}[met]
        if (self.scale or self.versus is not None) and (ratio := self.ratio()) is not None:
            verdict += f" ({ratio:.2f}×)"
        return [self.metric, self.store, self.config, median, spread, target, verdict]


HEADINGS = ["metric", "store", "configuration", "median", "min–max (runs)", "target", "met?"]
RIGHT = {3, 4}


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table (aligned, so it reads as plain text too),
    followed by the numbered notes and errors of the rows."""
    body, notes = [], []
    for row in rows:
        cells = row.cells()
        marks = []
        for note in [*row.notes, *([f"error: {row.error}"] if row.error else [])]:
            notes.append(note)
            marks.append(f"[{len(notes)}]")
        if marks:
            cells[2] += " " + "".join(marks)
        body.append(cells)
    widths = [max(len(r[i]) for r in [HEADINGS, *body]) for i in range(len(HEADINGS))]

    def line(cells: list[str]) -> str:
        padded = [
            c.rjust(w) if i in RIGHT else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(
        ("-" * (w + 1) + ":") if i in RIGHT else "-" * (w + 2) for i, w in enumerate(widths)
    )
    out = [line(HEADINGS), rule + "|", *(line(cells) for cells in body)]
    if notes:
        out.append("")
        out += [f"[{i}] {note}" for i, note in enumerate(notes, 1)]
    return "\n".join(out)
