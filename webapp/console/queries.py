"""Reads the console makes of the store, each bounded: overview figures, job
search and the selection a bulk action applies to.

Everything here goes through the JobStore contract; where the contract has no
query for what the page wants (part of an id, a job count for a name filter),
the read scans a bounded number of newest pages and says so in its result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from store.base import JobStore
from store.errors import ValidationError
from store.lifecycle import JobStatus
from store.models import Counts, Job, QueueState, WorkerInfo
from store.search import SearchQuery, matches, parse_payload_filter
from webapp.console.diagnosis import epoch, is_alive, is_overdue


@dataclass(frozen=True, slots=True)
class WorkerRow:
    """A registry entry with its liveness and heartbeat age (seconds):
    ``overdue`` while alive but late for its heartbeat (diagnosis.OVERDUE_TTLS)."""

    info: WorkerInfo
    alive: bool
    age_s: float | None
    overdue: bool = False

    @property
    def state(self) -> str:
        """``alive``, ``overdue`` (alive, heartbeat late) or ``silent``."""
        return "silent" if not self.alive else "overdue" if self.overdue else "alive"


def worker_rows(store: JobStore, now_s: float, lease_ttl_s: float) -> list[WorkerRow]:
    rows = []
    for w in store.workers():
        seen = epoch(w.last_seen_at)
        age = None if seen is None else now_s - seen
        rows.append(WorkerRow(w, is_alive(w, now_s, lease_ttl_s), age, is_overdue(w, now_s, lease_ttl_s)))
    return rows


def queue_state(store: JobStore, queue: str) -> QueueState | None:
    """The pause state of ``queue`` (None when it was never paused or resumed)."""
    return next((q for q in store.queue_states() if q.name == queue), None)


def paused_queues(store: JobStore) -> dict[str, QueueState]:
    """Queues paused now, by name."""
    return {q.name: q for q in store.queue_states() if q.paused}


def queued_in(counts: Counts, queue: str) -> int:
    return counts.by_queue.get(queue, {}).get(JobStatus.Queued.name, 0)


@dataclass(frozen=True, slots=True)
class Filters:
    """The job list's filters, as the query string gives them (validated)."""

    status: JobStatus | None = None
    queue: str | None = None
    name: str | None = None
    id_part: str | None = None
    oldest_first: bool = False
    #: Search criteria (store/search.py): text of the error, ``key=value`` of the payload.
    error: str | None = None
    payload: str | None = None

    def store_kwargs(self) -> dict[str, object]:
        return {"status": self.status, "queue": self.queue, "name": self.name}

    @property
    def searching(self) -> bool:
        """Whether a search criterion is set (the list is a search_jobs page)."""
        return bool(self.id_part or self.error or self.payload)

    def search_kwargs(self) -> dict[str, object]:
        return {**self.store_kwargs(), "id_part": self.id_part, "error": self.error, "payload": self.payload}

    def passes(self, job: Job) -> bool:
        """Whether ``job`` passes every filter (bulk actions check each job)."""
        payload = parse_payload_filter(self.payload) if self.payload else None
        query = SearchQuery(self.id_part, self.error, payload, self.status, self.queue, self.name)
        return matches(job, query)

    def as_query(self) -> dict[str, str]:
        """Non-empty filters as query parameters (for links and hidden fields)."""
        out = {
            "status": self.status.name if self.status else "",
            "queue": self.queue or "",
            "name": self.name or "",
            "id": self.id_part or "",
            "error": self.error or "",
            "payload": self.payload or "",
            "sort": "oldest" if self.oldest_first else "",
        }
        return {k: v for k, v in out.items() if v}

    @property
    def any(self) -> bool:
        return bool(self.status or self.queue or self.name or self.searching)


def parse_filters(args: dict[str, str]) -> tuple[Filters, list[str]]:
    """Filters from query or form fields, and messages for the fields ignored."""
    problems: list[str] = []
    status = None
    raw_status = (args.get("status") or "").strip()
    if raw_status:
        try:
            status = JobStatus.parse(raw_status)
        except ValueError as exc:
            problems.append(str(exc))
    part = (args.get("id") or "").strip().lstrip("…").lower() or None  # a pasted short id keeps its "…"
    if part and not all(c in "0123456789abcdef-" for c in part):
        problems.append("id: only hexadecimal digits and dashes")
        part = None
    filters = Filters(
        status=status,
        queue=(args.get("queue") or "").strip() or None,
        name=(args.get("name") or "").strip() or None,
        id_part=part,
        oldest_first=args.get("sort") == "oldest",
        error=(args.get("error") or "").strip() or None,
        payload=_payload(args.get("payload"), problems),
    )
    return filters, problems


def _payload(text: str | None, problems: list[str]) -> str | None:
    """The payload filter ``key=value`` as typed, or None (with a problem) when malformed."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        parse_payload_filter(text)
    except ValidationError as exc:
        problems.append(str(exc))
        return None
    return text


@dataclass
class Search:
    """A page of matching jobs, the cursors of the next and previous ones, and
    notes on how the result was obtained (shown under the table)."""

    items: list[Job]
    next_cursor: str | None
    notes: list[str] = field(default_factory=list)
    prev_cursor: str | None = None


def search(
    store: JobStore, filters: Filters, limit: int, cursor: str | None, before: str | None = None
) -> Search:
    """One page of the job list: a keyset page (both ways), or with a search
    criterion one page of store.search_jobs, noting how far the store searched
    when it stopped at its scan limit."""
    if filters.searching:
        found = store.search_jobs(**filters.search_kwargs(), limit=limit)  # type: ignore[arg-type]
        notes = []
        if not found.complete:
            notes.append(
                f"Searched the newest {found.scanned:,} jobs that pass the other filters; "
                "older matches are not shown. Narrow the filters to search further back."
            )
        return Search(found.items, None, notes)
    order = "asc" if filters.oldest_first else "desc"
    page = store.list_jobs(**filters.store_kwargs(), limit=limit, cursor=cursor, order=order, before=before)
    return Search(page.items, page.next_cursor, [], page.prev_cursor)


def since(value: datetime | None, now_s: float) -> float | None:
    """Seconds from ``value`` to ``now_s`` (negative if in the future)."""
    t = epoch(value)
    return None if t is None else now_s - t
