"""Which jobs a bulk operation acts on, and how many (``store/bulk.py`` runs it).

A filter is a dict of strings (as the operation stores it):

* ``status``, ``queue``, ``name``: the listing filters; counted exactly from
  the store's counters and indexes (``store.count_jobs``), whatever its size.
* ``error``, ``payload``: the job list's search (``store/search.py``): text of
  the error (Failed and Scheduled jobs), one payload field ``key=value``. The
  operation walks the listing filters' jobs and acts on those that match,
  however many. The preview counts them the same way but reads at most
  PREVIEW_SCAN_LIMIT jobs of the listing filters, newest update first (for
  ``error``, the Failed then the Scheduled ones), like the job list's search:
  its cost is bounded at any store size, and past the limit its counts are
  lower bounds (``complete`` False, said on the console's panel).
* ``ids``: job ids an operator selected, comma-separated, at most
  MAX_SELECTED_IDS; the other keys still apply to each of them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from store.base import MAX_PAGE_SIZE, JobStore
from store.errors import JobNotFound, ValidationError
from store.lifecycle import OPERATIONS, JobStatus, Operation
from store.models import Job
from store.search import ERROR_STATUSES, SearchQuery, matches, parse_payload_filter

#: The keys a filter may have.
FILTER_KEYS = ("status", "queue", "name", "error", "payload", "ids")
#: Most job ids one operation may name.
MAX_SELECTED_IDS = 1_000
#: Jobs a preview with an error or payload search reads at most, whole rows,
#: newest first: at 1,000,000 jobs 2,000 keep the preview within the console's
#: 200 ms on every store (bench/RESULTS.md, "Console at 1,000,000 jobs"); the
#: job list's own search reads up to SEARCH_SCAN_LIMIT through each engine's index.
PREVIEW_SCAN_LIMIT = 2_000
#: Longest error text searched (characters).
MAX_ERROR_TEXT = 500
#: The lifecycle operation of each action.
ACTIONS: dict[str, Operation] = {
    "cancel": Operation.CANCEL,
    "requeue": Operation.REQUEUE,
    "retry": Operation.RETRY_NOW,
    "delete": Operation.DELETE,
}


@dataclass(frozen=True, slots=True)
class Preview:
    """What an action on a filter would touch: ``eligible`` jobs whose status
    allows it, ``matching`` every job passing the filter. Both are exact when
    ``complete``; else they are counted in the ``scanned`` newest jobs of a
    search filter (PREVIEW_SCAN_LIMIT) and older ones may match too."""

    eligible: int
    matching: int
    complete: bool = True
    scanned: int = 0


def statuses_of(action: str) -> frozenset[JobStatus]:
    """The statuses ``action`` (a key of ACTIONS) applies to."""
    return OPERATIONS[ACTIONS[action]].sources


def _ids(raw: Any) -> str:
    """Selected ids as the filter stores them: canonical, comma-separated, in
    the order given, duplicates dropped. Raises ValidationError naming ``ids``."""
    items = raw.split(",") if isinstance(raw, str) else raw
    if not isinstance(items, list | tuple) or not items:
        raise ValidationError("ids", "must be a non-empty list of job ids")
    if len(items) > MAX_SELECTED_IDS:
        raise ValidationError("ids", f"at most {MAX_SELECTED_IDS:,} job ids, got {len(items):,}")
    try:
        canonical = [str(uuid.UUID(str(i).strip())) for i in items]
    except ValueError:
        raise ValidationError("ids", "each must be a job id (a UUID)") from None
    return ",".join(dict.fromkeys(canonical))


def check_filter(raw: Mapping[str, Any]) -> dict[str, str]:
    """The filter with its status as a name and its ids canonical. Raises
    ValidationError naming ``filter`` (an unknown key), ``status``, ``error``,
    ``payload`` or ``ids``."""
    unknown = set(raw) - set(FILTER_KEYS)
    if unknown:
        raise ValidationError("filter", f"unknown keys {sorted(unknown)}; use {', '.join(FILTER_KEYS)}")
    out = {k: v if k == "ids" else str(v) for k, v in raw.items() if v not in (None, "", [], ())}
    if "status" in out:
        try:
            out["status"] = JobStatus.parse(out["status"]).name
        except ValueError as exc:
            raise ValidationError("status", str(exc)) from None
    if "error" in out:
        out["error"] = out["error"].strip()
        if not 1 <= len(out["error"]) <= MAX_ERROR_TEXT:
            raise ValidationError("error", f"must be 1-{MAX_ERROR_TEXT} characters")
    if "payload" in out:
        parse_payload_filter(out["payload"])
    if "ids" in out:
        out["ids"] = _ids(out["ids"])
    return out


def search_of(filter_: Mapping[str, str]) -> SearchQuery:
    """The filter as the search predicate each job is tested with."""
    payload = parse_payload_filter(filter_["payload"]) if "payload" in filter_ else None
    status = JobStatus[filter_["status"]] if "status" in filter_ else None
    return SearchQuery(None, filter_.get("error"), payload, status, filter_.get("queue"), filter_.get("name"))


def searching(filter_: Mapping[str, str]) -> bool:
    """Whether the filter goes past the listing filters (jobs are tested one by one)."""
    return any(k in filter_ for k in ("error", "payload", "ids"))


def selected(filter_: Mapping[str, str]) -> list[str]:
    """The filter's job ids (empty without ``ids``)."""
    return filter_["ids"].split(",") if filter_.get("ids") else []


def _walk(store: JobStore, query: SearchQuery) -> Iterator[Job]:
    """Every job passing the listing filters of ``query`` (for an error search,
    of the statuses that keep an error), a page of MAX_PAGE_SIZE at a time."""
    for status in query.statuses() if query.error else [query.status]:
        cursor = None
        while True:
            page = store.list_jobs(
                status=status, queue=query.queue, name=query.name, limit=MAX_PAGE_SIZE, cursor=cursor
            )
            yield from page.items
            if page.next_cursor is None or not page.items:
                break
            cursor = page.next_cursor


def matching_jobs(store: JobStore, filter_: Mapping[str, str]) -> Iterator[Job]:
    """Every job the filter matches now (ids: in their order; else newest update first)."""
    query = search_of(filter_)
    if "ids" in filter_:
        for job_id in selected(filter_):
            try:
                job = store.get(job_id)
            except JobNotFound:
                continue
            if matches(job, query):
                yield job
        return
    yield from (j for j in _walk(store, query) if matches(j, query))


def preview(
    store: JobStore,
    action: str,
    status: JobStatus | None = None,
    queue: str | None = None,
    name: str | None = None,
    **search: str,
) -> Preview:
    """Count the jobs ``action`` would change on the filter, and every job
    passing it, exactly. With only status, queue and name: from the store's
    counters and indexes (``store.count_jobs``), whatever the store's size.
    With ``error``, ``payload`` or ``ids`` (``search``, as check_filter takes
    them): by testing each job (see the module docstring)."""
    allowed = statuses_of(action)
    if any(search.values()):
        where = check_filter(
            {"status": status.name if status else None, "queue": queue, "name": name, **search}
        )
        if "ids" in where:  # at most MAX_SELECTED_IDS reads
            found = [j.status for j in matching_jobs(store, where)]
            return Preview(sum(1 for s in found if s in allowed), len(found))
        query, found, scanned = search_of(where), [], 0
        for job in _walk(store, query):
            if scanned == PREVIEW_SCAN_LIMIT:
                return Preview(sum(1 for s in found if s in allowed), len(found), False, scanned)
            scanned += 1
            if matches(job, query):
                found.append(job.status)
        return Preview(sum(1 for s in found if s in allowed), len(found), True, scanned)
    chosen = {status} if status else set(JobStatus)
    if name:
        counted = {s: store.count_jobs(s, queue=queue, name=name) for s in chosen}
    else:  # one read of the counters for every status
        source = store.counts().of(queue)
        counted = {s: int(source.get(s.name, 0)) for s in chosen}
    return Preview(sum(n for s, n in counted.items() if s in allowed), sum(counted.values()))


def preview_filter(store: JobStore, action: str, filter_: Mapping[str, str]) -> Preview:
    """``preview`` of a checked filter (``check_filter``'s output)."""
    status = JobStatus[filter_["status"]] if "status" in filter_ else None
    search = {k: filter_[k] for k in ("error", "payload", "ids") if k in filter_}
    return preview(store, action, status, filter_.get("queue"), filter_.get("name"), **search)


__all__ = ["ERROR_STATUSES", "FILTER_KEYS", "MAX_SELECTED_IDS", "Preview", "check_filter", "preview"]
