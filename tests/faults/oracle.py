"""The fault tests' oracle: the ledger the handlers write, and the invariants
the store must keep whatever was killed or raced.

``invariants`` returns a list of violations (strings), empty when all hold;
tests assert it is empty so a failure names every broken job at once.
``metrics_disagreements`` does the same for what a web process exports on
``/metrics`` against the store it reads.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from store.base import MAX_PAGE_SIZE, JobStore
from store.lifecycle import TERMINAL, JobStatus, is_legal
from store.models import Job, JobEvent

#: Violations listed in a failure message (the count is always given).
SHOWN = 25


@dataclass(frozen=True, slots=True)
class LedgerRow:
    job_id: str
    token: int
    worker: str
    time: float
    outcome: str
    name: str


def read_ledger(path: Path) -> list[LedgerRow]:
    """Every row of the ledger file (none when no handler ran yet)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            d = json.loads(line)
            rows.append(LedgerRow(d["job_id"], d["token"], d["worker"], d["time"], d["outcome"], d["name"]))
    return rows


def all_jobs(store: JobStore) -> list[Job]:
    """Every job, through keyset paging."""
    jobs: list[Job] = []
    cursor = None
    while True:
        page = store.list_jobs(limit=MAX_PAGE_SIZE, cursor=cursor)
        jobs += page.items
        if page.next_cursor is None:
            return jobs
        cursor = page.next_cursor


def unfinished(store: JobStore) -> int:
    """Jobs not yet in a final status, from the counters."""
    by = store.counts().by_status
    return sum(n for name, n in by.items() if JobStatus[name] not in TERMINAL)


def all_events(store: JobStore, jobs: Iterable[Job]) -> dict[str, list[JobEvent]]:
    return {job.id: store.events(job.id, limit=1000) for job in jobs}


def invariants(
    store: JobStore,
    ledger_rows: list[LedgerRow],
    *,
    operators: bool = False,
    jobs: list[Job] | None = None,
    events: dict[str, list[JobEvent]] | None = None,
) -> list[str]:
    """What must hold once every job is final.

    * every job is Completed, Failed or Canceled (none InProgress);
    * a Completed job's final token has an ``ok`` ledger row (the run that
      recorded the outcome really ran to its end), and no (job, token) ran twice;
    * ``retry_count <= max_retries``;
    * tokens strictly increase across a job's ``claimed`` events, and each
      status change starts from the status the previous one ended in, by a
      legal transition (``lifecycle.is_legal``);
    * ``lease_expirations`` is at most the job's number of claims;
    * ``counts()`` equals a recount of the listed jobs;
    * without operators (who can cancel a Completed job and requeue it), one
      ``completed`` event per Completed job and ``event_counts()["completed"]``
      equal to the number of Completed jobs (no double completion).
    """
    jobs = all_jobs(store) if jobs is None else jobs
    events = all_events(store, jobs) if events is None else events
    bad: list[str] = []
    runs: dict[tuple[str, int], list[LedgerRow]] = defaultdict(list)
    for row in ledger_rows:
        runs[(row.job_id, row.token)].append(row)
    for key, rows in runs.items():
        if len(rows) > 1:
            bad.append(f"job {key[0]} token {key[1]} ran {len(rows)} times: {[r.worker for r in rows]}")

    for job in jobs:
        if job.status not in TERMINAL:
            bad.append(f"job {job.id} ({job.name}) ended {job.status.name}")
        if job.retry_count > job.max_retries:
            bad.append(f"job {job.id} retry_count {job.retry_count} > max_retries {job.max_retries}")
        if job.status is JobStatus.Completed:
            rows = runs.get((job.id, job.lease_token), [])
            if not any(r.outcome == "ok" for r in rows):
                seen = sorted((r.token, r.outcome) for r in ledger_rows if r.job_id == job.id)
                bad.append(
                    f"Completed job {job.id} token {job.lease_token} has no ok ledger row (ledger {seen})"
                )
        bad += _timeline(job, events[job.id], operators)

    counted = Counter(job.status.name for job in jobs)
    by_status = store.counts().by_status
    for status in JobStatus:
        if by_status.get(status.name, 0) != counted.get(status.name, 0):
            kept, recount = by_status.get(status.name, 0), counted.get(status.name, 0)
            bad.append(f"counts() {status.name}={kept}, recount {recount}")
    if not operators:
        completed = store.event_counts().get("completed", 0)
        if completed != counted["Completed"]:
            bad.append(f"event_counts completed={completed} but {counted['Completed']} jobs are Completed")
    return bad


def _timeline(job: Job, timeline: list[JobEvent], operators: bool) -> list[str]:
    bad: list[str] = []
    last_token = 0
    claims = 0
    status: JobStatus | None = None
    completions = 0
    for e in timeline:
        if e.kind == "claimed":
            claims += 1
            if e.token is None or e.token <= last_token:
                bad.append(f"job {job.id}: claim token {e.token} after {last_token}")
            last_token = e.token if e.token is not None else last_token
        if e.kind == "completed":
            completions += 1
        if e.to_status is None:
            continue  # refusals and notes change nothing
        if e.from_status is not None:
            if not is_legal(e.from_status, e.to_status):
                bad.append(f"job {job.id}: illegal {e.kind} {e.from_status.name} -> {e.to_status.name}")
            if status is not None and e.from_status != status:
                bad.append(f"job {job.id}: {e.kind} from {e.from_status.name} but it was {status.name}")
        status = e.to_status
    if status is not None and status != job.status:
        bad.append(f"job {job.id}: timeline ends {status.name}, job is {job.status.name}")
    if job.lease_expirations > claims:
        bad.append(f"job {job.id}: {job.lease_expirations} lease expirations > {claims} claims")
    if not operators and job.status is JobStatus.Completed and completions != 1:
        bad.append(f"job {job.id}: {completions} completed events")
    return bad


def summary(bad: list[str]) -> str:
    more = f"\n... and {len(bad) - SHOWN} more" if len(bad) > SHOWN else ""
    return f"{len(bad)} violations:\n" + "\n".join(bad[:SHOWN]) + more


def figures(store: JobStore, jobs: list[Job]) -> dict[str, Any]:
    """Totals for a report: jobs by status, retries, lease expirations."""
    by = Counter(j.status.name for j in jobs)
    ev = store.event_counts()
    return {
        "jobs": len(jobs),
        "completed": by["Completed"],
        "failed": by["Failed"],
        "canceled": by["Canceled"],
        "retries": sum(j.retry_count for j in jobs),
        "lease_expired": ev.get("lease_expired", 0),
    }


#: The API token of the web app ``metrics_disagreements`` builds.
METRICS_TOKEN = "faults-metrics-token"


def scrape_metrics(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """GET /metrics from a web app built with ``create_app`` on ``url`` (its own
    store handle, as a separate web process would have): sample (name,
    labels) -> value. Raises AssertionError when the scrape is not a 200."""
    from prometheus_client.parser import text_string_to_metric_families

    from webapp import create_app

    app = create_app(
        {
            "STORE_URL": url,
            "API_TOKENS": f"{METRICS_TOKEN}:viewer",
            "SECRET_KEY": "faults-metrics-secret-0123456789abcdef0123456789",
            "TESTING": True,
        }
    )
    try:
        response = app.test_client().get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    finally:
        app.extensions["leasehold"].close()
    assert response.status_code == 200, f"/metrics answered {response.status_code}: {response.text[:500]}"
    out = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


#: Named counters of /metrics and the job event kind each one exports.
_COUNTED_EVENTS = {
    "leasehold_jobs_enqueued_total": "enqueued",
    "leasehold_jobs_claimed_total": "claimed",
    "leasehold_jobs_completed_total": "completed",
    "leasehold_jobs_failed_total": "failed",
    "leasehold_retries_scheduled_total": "retry_scheduled",
    "leasehold_lease_expirations_total": "lease_expired",
}


def metrics_disagreements(url: str, store: JobStore) -> list[str]:
    """Where ``/metrics`` and the store disagree, once nothing moves (workers
    stopped): the per-status and per-queue job gauges against
    ``store.counts()``, the event counters against ``store.event_counts()``,
    and the per-status gauges against a recount of the listed jobs."""
    got = scrape_metrics(url)
    counts = store.counts()
    bad: list[str] = []
    recount = Counter(job.status.name for job in all_jobs(store))
    for status in JobStatus:
        exported = sum(
            v
            for (name, labels), v in got.items()
            if name == "leasehold_jobs" and ("status", status.name) in labels
        )
        kept = counts.by_status.get(status.name, 0)
        if exported != kept:
            bad.append(f"/metrics sum of jobs{{status={status.name}}}={exported}, counts() {kept}")
        if kept != recount.get(status.name, 0):
            bad.append(f"counts() {status.name}={kept}, recount {recount.get(status.name, 0)}")
        for queue, row in counts.by_queue.items():
            exported = got.get(("leasehold_jobs", (("queue", queue), ("status", status.name))))
            if exported != row.get(status.name, 0):
                bad.append(
                    f"/metrics jobs{{{queue},{status.name}}}={exported}, counts() {row.get(status.name, 0)}"
                )
    totals = store.event_counts()
    for name, kind in _COUNTED_EVENTS.items():
        if got.get((name, ())) != totals.get(kind, 0):
            bad.append(f"/metrics {name}={got.get((name, ()))}, event_counts {kind}={totals.get(kind, 0)}")
    return bad
