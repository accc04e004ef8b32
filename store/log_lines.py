"""Job log lines as the stores keep them: the value object and its bounds,
with no engine import (store/job_logs.py is the door; the engines'
store/sql/job_logs.py and store/redis/job_logs.py read these)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from store.spec import scrub_nul

#: Longest line kept, characters (longer ones are cut, ``…`` marking the cut).
MAX_LINE_CHARS = 4000
#: Lines an attempt keeps by default (LEASEHOLD_JOB_LOG_LINES).
DEFAULT_LINES = 1000
#: Most lines one read returns.
MAX_READ = 1000
#: Redis cursors: ``attempt * CURSOR_SPAN + line number`` (a line number never reaches it).
CURSOR_SPAN = 10**12
#: Level names kept (others are stored as the nearest standard name by the worker).
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line to store (see the module's docstring)."""

    job_id: str
    attempt: int
    at: float
    level: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"attempt": self.attempt, "at": self.at, "level": self.level, "message": self.message}


def clean_message(message: str) -> str:
    """``message`` as stored: NULs replaced, cut to MAX_LINE_CHARS."""
    text = scrub_nul(message)
    return text if len(text) <= MAX_LINE_CHARS else text[: MAX_LINE_CHARS - 1] + "…"
