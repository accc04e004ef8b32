"""Search of jobs: what ``search_jobs`` takes and returns,
and the one predicate every store applies where it cannot ask its engine.

A search matches every criterion given: part of the id (case-insensitive),
text in the error's type or message (Failed and Scheduled jobs only: the jobs
an error is kept on), and one payload field equal to a JSON value; plus the
listing filters status, queue and name. Results come newest update first.

How far a store searches depends on what its engine can index; a store that
stops early says so with ``complete=False`` and ``scanned``:

* SQL: the listing filters (and on PostgreSQL a payload field, by jsonb
  containment on a GIN index) over the whole table through its indexes; id
  and error by ``LIKE`` (and on SQLite a payload field, by ``json_each``)
  within the ``scan_limit`` newest jobs that pass those (store/sql/search.py).
* Redis: the ``scan_limit`` newest jobs of the filtered listing index, each
  read and tested here (``matches``).

So no search reads more than ``scan_limit`` jobs' rows on any store, and a
console or API search costs the same on a table of any size. A search whose
id part is a whole job id (``store.ids.is_whole_id``: only that job's id
contains it) reads that job alone by id, on every store, so it is found
whatever its age (store/shared.py ``_search_by_id``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from store.errors import ValidationError
from store.lifecycle import JobStatus
from store.models import Job

#: Statuses whose jobs carry an error worth searching.
ERROR_STATUSES = frozenset({JobStatus.Failed, JobStatus.Scheduled})
#: Jobs a store that scans reads at most per search, by default.
SEARCH_SCAN_LIMIT = 10_000
#: Largest scan_limit a caller may ask for.
MAX_SCAN_LIMIT = 100_000


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """Validated criteria (see the module docstring); None = not searched."""

    id_part: str | None = None
    error: str | None = None
    payload: tuple[str, Any] | None = None
    status: JobStatus | None = None
    queue: str | None = None
    name: str | None = None

    def statuses(self) -> list[JobStatus]:
        """The statuses to search: the filter's, narrowed to ERROR_STATUSES
        when searching errors (possibly none)."""
        chosen = [self.status] if self.status else list(JobStatus)
        return [s for s in chosen if self.error is None or s in ERROR_STATUSES]


@dataclass(frozen=True, slots=True)
class SearchPage:
    """Up to ``limit`` matching jobs, newest update first. ``complete`` is
    False when the store stopped at its scan limit before filling the page
    (older matches may exist); ``scanned`` is how many jobs it examined."""

    items: list[Job]
    complete: bool
    scanned: int

    def summary(self) -> dict[str, bool | int]:
        """``complete`` and ``scanned`` as the API shows them."""
        return {"complete": self.complete, "scanned": self.scanned}


def parse_payload_filter(text: str) -> tuple[str, Any]:
    """``key=value`` as ``(key, value)``: the value read as JSON when it
    parses (``n=3``, ``ok=true``, ``s="3"``), else taken as a string
    (``user=ann``). Raises ValidationError naming ``payload``."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValidationError("payload", "must be key=value")
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        value = raw
    if isinstance(value, dict | list):
        raise ValidationError("payload", "the value must be a string, number, boolean or null")
    return key, value


def like_pattern(text: str) -> str:
    """``%text%`` for a case-insensitive ``LIKE … ESCAPE '\\'``: lower-cased,
    with ``%``, ``_`` and ``\\`` escaped."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def error_texts(error: Any) -> tuple[str, str]:
    """The searchable texts of a stored error: its type and its message,
    lower-cased (the SQL stores match each with ``LIKE``)."""
    if not isinstance(error, dict):
        return "", ""
    return str(error.get("type") or "").lower(), str(error.get("message") or "").lower()


def matches(job: Job, query: SearchQuery) -> bool:
    """Whether ``job`` passes every criterion of ``query`` (the listing
    filters included), for the stores that test jobs one by one."""
    if query.status is not None and job.status is not query.status:
        return False
    if (query.queue is not None and job.queue != query.queue) or (
        query.name is not None and job.name != query.name
    ):
        return False
    if query.id_part is not None and query.id_part not in job.id.lower():
        return False
    if query.error is not None and (
        job.status not in ERROR_STATUSES or not error_matches(job.error, query.error)
    ):
        return False
    return query.payload is None or payload_matches(job.payload, query.payload)


def error_matches(error: Any, text: str) -> bool:
    """Whether a stored error's type or message holds ``text`` (any case)."""
    wanted = text.lower()
    return any(wanted in t for t in error_texts(error))


def payload_matches(payload: Any, field: tuple[str, Any]) -> bool:
    """Whether ``payload`` is an object whose field ``field[0]`` equals the
    JSON value ``field[1]`` (a number equals a number of the other type, as
    in JSON; a boolean is not a number)."""
    key, value = field
    if not isinstance(payload, dict) or key not in payload:
        return False
    found = payload[key]
    if type(found) is not type(value) and not (_number(found) and _number(value)):
        return False  # 1 == True in Python, not in JSON
    return bool(found == value)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
