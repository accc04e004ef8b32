"""Fill a store with jobs of mixed statuses fast, for the console bench
(bench/console_pages.py).

Job ``i`` of ``n`` (0 the oldest) has queue ``q{i % QUEUES:02d}``, name
``job-{(i // QUEUES) % NAMES:02d}`` (so every queue/name pair occurs), a
status picked by ``(i * 7919) % 10,000`` against MIX (a permutation of the
residues: the statuses interleave in time), a payload ``{"i", "path",
"user": "user-<i % 1000>"}`` and, when Failed or Scheduled, one of ERRORS.
Times are spread evenly over the SPAN_S before the load; a Scheduled job is
due 1 min to 1 day after it.

As in bench/scale.py the jobs are copies: one template job per status is run
through the store itself (enqueue; claim and complete / fail for good / fail
with a retry pending; cancel), then its row (Redis: hash) and its events are
copied to new ids with the job's own fields and times. The counters (jobs by
status and queue, event totals) and the history buckets (per minute for 48 h,
per hour for 30 days) are raised by what the copies' events add. After the
copy, IN_PROGRESS Queued jobs are claimed by the store with a lease of a day.

* Redis: the store's bulk fixtures (``store/redis/fixtures.py``, its
  ``copy_jobs`` function), 1,000 copies of one status and queue a call,
  indexed, counted and put in the minute history as the store's own
  functions do; then ``trim_history`` rolls the hours up.
* PostgreSQL: ``INSERT … SELECT`` over ``generate_series``, the template
  picked by a join on the status; SQLite the same with a recursive CTE.
  Then ``VACUUM ANALYZE`` / ``ANALYZE``.

Failed attempts (``store.attempts``) are not copied: only the templates have them.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import create_engine, text

from store import JobStore
from store.counters import HISTORY_KINDS, HISTORY_WIDTHS, NARROW, bucket_of, event_key, rolled_key, status_key
from store.lifecycle import JobStatus
from store.models import Job

S = JobStatus
QUEUES = 20
NAMES = 50
#: Statuses of the copies, per 10,000 jobs (Queued jobs then become InProgress, see IN_PROGRESS).
MIX: tuple[tuple[JobStatus, int], ...] = (
    (S.Completed, 7_200),
    (S.Queued, 1_500),
    (S.Scheduled, 500),
    (S.Failed, 500),
    (S.Canceled, 300),
)
#: Queued jobs claimed by the store after the copy (a lease of LEASE_S).
IN_PROGRESS = 300
LEASE_S = 86_400.0
#: The copies' times are spread over this many seconds before the load.
SPAN_S = 6 * 86_400.0
#: Error messages of Failed and Scheduled jobs: ERRORS[i % 5] with k = i % 40.
ERRORS = (
    "connection refused by db-{k}",
    "timeout after 30 s",
    "KeyError: 'path'",
    "disk full on /var/spool/{k}",
    "HTTP 503 from api-{k}",
)
SQL_CHUNK = 100_000
WORKER = "bench-loader"
assert sum(share for _, share in MIX) == 10_000


def queue_of(i: int) -> str:
    return f"q{i % QUEUES:02d}"


def name_of(i: int) -> str:
    return f"job-{(i // QUEUES) % NAMES:02d}"


def status_of(i: int) -> JobStatus:
    r = (i * 7919) % 10_000
    for status, share in MIX:
        if r < share:
            return status
        r -= share
    raise AssertionError("MIX does not add up to 10,000")


def payload_of(i: int) -> dict[str, Any]:
    return {"i": i, "path": f"/src/module_{i}.py", "user": f"user-{i % 1000:03d}"}


def message_of(i: int) -> str:
    return ERRORS[i % len(ERRORS)].format(k=i % 40)


def fmt(x: float) -> str:
    """A time as the Redis store writes it (lua/lib/clock.lua ``fmt``)."""
    return f"{x:.17g}"


@dataclass
class Loaded:
    """What a load made: seconds, jobs by status, the templates by status."""

    seconds: float
    by_status: dict[str, int]
    templates: dict[JobStatus, Job] = field(default_factory=dict)


def make_templates(store: JobStore) -> dict[JobStatus, Job]:
    """One job per status of MIX, run through the store in queue ``q00`` (the
    Queued one last, so that no claim here takes it)."""
    error = {"type": "RuntimeError", "message": message_of(0), "traceback": "Traceback …\nRuntimeError"}
    out: dict[JobStatus, Job] = {}
    for status in sorted((s for s, _ in MIX), key=lambda s: s is S.Queued):
        job = store.enqueue(name_of(0), payload_of(0), queue=queue_of(0), max_retries=3)
        if status is S.Canceled:
            out[status] = store.cancel(job.id, actor="operator:bench")
        elif status is not S.Queued:
            [held] = store.claim(WORKER, [queue_of(0)], 1)
            if status is S.Completed:
                out[status] = store.complete(job.id, held.lease_token, {"ok": True}, WORKER)
            else:
                out[status] = store.fail(job.id, held.lease_token, error, permanent=status is S.Failed)
        else:
            out[status] = job
        assert out[status].status is status, (status, out[status].status)
    return out


def load(store: JobStore, n: int, progress: bool = True) -> Loaded:
    """Add ``n`` jobs (see the module docstring) to an empty store."""
    t0 = time.perf_counter()
    templates = make_templates(store)
    kinds = {s: Counter(e.kind for e in store.events(t.id)) for s, t in templates.items()}
    now = store.now()
    end, step = now - 60.0, SPAN_S / n
    url: str = store.url  # type: ignore[attr-defined]
    if url.startswith(("sqlite", "postgresql")):
        _load_sql(url, templates, kinds, n, now, end, step, progress)
    else:
        _load_redis(store, templates, kinds, n, now, end, step, progress)
    queues = [queue_of(q) for q in range(QUEUES)]
    claimed = store.claim(WORKER, queues, IN_PROGRESS, lease_ttl_s=LEASE_S)
    assert len(claimed) == IN_PROGRESS, len(claimed)
    return Loaded(time.perf_counter() - t0, store.counts().by_status, templates)


def _say(done: int, total: int, t0: float, progress: bool) -> None:
    if progress and (done == total or done % 100_000 == 0):
        rate = done / max(time.perf_counter() - t0, 1e-9)
        print(f"#   copied {done:,} of {total:,} ({rate:,.0f}/s)", file=sys.stderr, flush=True)


# ----------------------------------------------------------------- Redis
def _load_redis(
    store: Any,
    templates: dict[JobStatus, Job],
    kinds: dict[JobStatus, Counter[str]],
    n: int,
    now: float,
    end: float,
    step: float,
    progress: bool,
) -> None:
    """The copies through the store's own bulk fixtures (store/redis/fixtures.py:
    indexes, counters and minute history as its functions write them), then
    ``trim_history`` rolls the hours up and drops the minutes past retention."""
    from store.redis.fixtures import CHUNK, Copy, copy_jobs

    groups: dict[tuple[JobStatus, str], list[Copy]] = {}
    errors = {s: t.error for s, t in templates.items()}
    t0 = time.perf_counter()

    def flush(status: JobStatus, queue: str) -> None:
        copy_jobs(store, templates[status].id, queue, groups.pop((status, queue)), kinds[status])

    for i in range(n):
        status, queue = status_of(i), queue_of(i)
        error = errors[status]
        copy = Copy(
            str(uuid.uuid4()),
            end - (n - i) * step,
            name=name_of(i),
            payload=orjson.dumps(payload_of(i)).decode(),
            error=orjson.dumps({**error, "message": message_of(i)}).decode() if error else None,
            due_at=now + 60 + i % 86_400 if status is S.Scheduled else None,
        )
        members = groups.setdefault((status, queue), [])
        members.append(copy)
        if len(members) == CHUNK:
            flush(status, queue)
        _say(i + 1, n, t0, progress)
    for status, queue in list(groups):
        flush(status, queue)
    t1 = time.perf_counter()
    while store.trim_history():
        pass
    if progress:
        print(f"#   history rolled up and trimmed in {time.perf_counter() - t1:.0f} s", file=sys.stderr)


def _event_totals(kinds: dict[JobStatus, Counter[str]], jobs: Counter[str]) -> Counter[str]:
    """Events the copies hold, by kind, from the copies by ``s:<status>:<queue>`` key."""
    per_status: Counter[JobStatus] = Counter()
    for key, count in jobs.items():
        per_status[JobStatus(int(key.split(":")[1]))] += count
    totals: Counter[str] = Counter()
    for status, count in per_status.items():
        for kind, times in kinds[status].items():
            totals[kind] += count * times
    return totals


# ------------------------------------------------------------------- SQL
def _sql_parts(dialect: str) -> dict[str, str]:
    """Dialect-specific SQL of a copy ``g.i``."""
    if dialect == "postgresql":
        pad = "lpad(CAST({} AS text), {}, '0')"
        return {
            "series": "generate_series(CAST(:lo AS bigint), CAST(:hi AS bigint)) AS g(i)",
            "id": "gen_random_uuid()::text",
            "pad": pad,
            "payload": "jsonb_build_object('i', g.i, 'path', '/src/module_' || g.i || '.py', "
            "'user', 'user-' || " + pad.format("g.i % 1000", 3) + ")",
            "error": "jsonb_set(t.error, '{{message}}', to_jsonb(CAST({} AS text)))",
            "floor": "floor({})",
        }
    return {
        "series": "(WITH RECURSIVE s(i) AS (SELECT :lo UNION ALL SELECT i + 1 FROM s WHERE i < :hi)"
        " SELECT i FROM s) AS g",
        "id": "lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)"
        " || '-' || substr('89ab', 1 + abs(random()) % 4, 1) || substr(hex(randomblob(2)), 2)"
        " || '-' || hex(randomblob(6)))",
        "pad": "printf('%0{1}d', {0})",
        "payload": "json_object('i', g.i, 'path', '/src/module_' || g.i || '.py', "
        "'user', 'user-' || printf('%03d', g.i % 1000))",
        "error": "json_set(t.error, '$.message', {})",
        "floor": "CAST({} AS INTEGER)",
    }


def _copy_jobs_sql(dialect: str, template_ids: list[str]) -> str:
    """INSERT of copies ``:lo``..``:hi`` (module docstring), each from the
    template of its status. The templates come first in a CROSS JOIN: SQLite
    keeps that order (otherwise it looks the template up through the status
    index once per copy, a scan of every job of that status)."""
    from store.sql.schema import jobs

    p = _sql_parts(dialect)
    r = "((g.i * 7919) % 10000)"
    cases, low = [], 0
    for status, share in MIX:
        low += share
        cases.append(f"WHEN {r} < {low} THEN {int(status)}")
    status = f"(CASE {' '.join(cases)} END)"
    message = " ".join(
        f"WHEN {j} THEN '{m.replace('{k}', '').replace(chr(39), chr(39) * 2)}'"
        + (" || CAST(g.i % 40 AS text)" if "{k}" in m else "")
        for j, m in enumerate(ERRORS)
    )
    at = "(CAST(:end AS double precision) - (:n - g.i) * :step)"
    due = "(CAST(:now AS double precision) + 60 + g.i % 86400)"
    exprs = {
        "id": p["id"],
        "queue": "'q' || " + p["pad"].format("g.i % 20", 2),
        "name": "'job-' || " + p["pad"].format(f"(g.i / {QUEUES}) % {NAMES}", 2),
        "payload": p["payload"],
        "error": p["error"].format(f"CASE g.i % {len(ERRORS)} {message} END"),
        "due_at": f"CASE WHEN t.status = {int(S.Scheduled)} THEN {due} ELSE {at} END",
        "retry_delay_until": f"CASE WHEN t.retry_delay_until IS NULL THEN NULL ELSE {due} END",
    }
    for column in ("created_at", "started_at", "last_heartbeat_at", "completed_at", "last_updated_at"):
        exprs[column] = f"CASE WHEN t.{column} IS NULL THEN NULL ELSE {at} END"
    assert QUEUES == 20, "the queue expression above assumes 20 queues"
    cols = [c.name for c in jobs.c]
    ids = ", ".join(f"'{t}'" for t in template_ids)
    return (
        f"INSERT INTO {jobs.name} ({', '.join(cols)}) "
        f"SELECT {', '.join(exprs.get(c, f't.{c}') for c in cols)} "
        f"FROM (SELECT * FROM {jobs.name} WHERE id IN ({ids})) AS t CROSS JOIN {p['series']} "
        f"WHERE t.status = {status}"
    )


def _copy_events_sql(template_ids: list[str]) -> str:
    """INSERT of the template's events (by status) for the copies updated in
    [:t_lo, :t_hi], at the copy's time."""
    from store.sql.schema import job_events, jobs

    cols = [c.name for c in job_events.c if c.name != "id"]
    exprs = ["j.id" if c == "job_id" else "j.last_updated_at" if c == "at" else f"e.{c}" for c in cols]
    ids = ", ".join(f"'{t}'" for t in template_ids)
    return (
        f"INSERT INTO {job_events.name} ({', '.join(cols)}) SELECT {', '.join(exprs)} "
        f"FROM {jobs.name} AS j "
        f"JOIN (SELECT id AS tid, status AS tstatus FROM {jobs.name} WHERE id IN ({ids})) AS tt "
        "ON tt.tstatus = j.status "
        f"JOIN {job_events.name} AS e ON e.job_id = tt.tid "
        f"WHERE j.last_updated_at BETWEEN :t_lo AND :t_hi AND j.id NOT IN ({ids}) "
        "ORDER BY j.last_updated_at, j.id, e.id"
    )


def _history_sql(dialect: str, template_ids: list[str], width: int, since: float) -> str:
    """History buckets of ``width`` seconds from ``since`` on, of the copies' events."""
    from store.sql.schema import history, job_events, jobs

    bucket = _sql_parts(dialect)["floor"].format(f"e.at / {width}") + f" * {width}"
    kinds = ", ".join(f"'{k}'" for k in sorted(HISTORY_KINDS))
    ids = ", ".join(f"'{t}'" for t in template_ids)
    return (
        f"INSERT INTO {history.name} (width, bucket, queue, kind, shard, n) "
        f"SELECT {width}, {bucket}, j.queue, e.kind, 0, count(*) "
        f"FROM {job_events.name} AS e JOIN {jobs.name} AS j ON j.id = e.job_id "
        f"WHERE e.kind IN ({kinds}) AND e.at >= {since!r} AND e.job_id NOT IN ({ids}) "
        "GROUP BY 2, 3, 4 "
        f"ON CONFLICT (width, bucket, queue, kind, shard) DO UPDATE SET n = {history.name}.n + excluded.n"
    )


def _load_sql(
    url: str,
    templates: dict[JobStatus, Job],
    kinds: dict[JobStatus, Counter[str]],
    n: int,
    now: float,
    end: float,
    step: float,
    progress: bool,
) -> None:
    from store.sql.schema import counters, history, jobs

    engine = create_engine(url)
    dialect = engine.dialect.name
    ids = [t.id for t in templates.values()]
    copy_jobs, copy_events = text(_copy_jobs_sql(dialect, ids)), text(_copy_events_sql(ids))
    upsert = text(
        f"INSERT INTO {counters.name} (key, shard, n) VALUES (:key, 0, :n) "
        f"ON CONFLICT (key, shard) DO UPDATE SET n = {counters.name}.n + excluded.n"
    )
    try:
        t0 = time.perf_counter()
        for lo in range(0, n, SQL_CHUNK):
            hi = min(n, lo + SQL_CHUNK) - 1
            params = {"lo": lo, "hi": hi, "n": n, "step": step, "end": end, "now": now}
            with engine.begin() as conn:
                conn.execute(copy_jobs, params)
                span = {"t_lo": end - (n - lo) * step - step / 2, "t_hi": end - (n - hi) * step + step / 2}
                conn.execute(copy_events, span)
            _say(hi + 1, n, t0, progress)
        with engine.begin() as conn:
            rows = conn.execute(
                text(f"SELECT status, queue, count(*) FROM {jobs.name} GROUP BY status, queue")
            )
            found = Counter({status_key(s, q): c for s, q, c in rows})
            conn.execute(text(f"DELETE FROM {counters.name} WHERE key LIKE 's:%'"))
            conn.execute(upsert, [{"key": key, "n": c} for key, c in found.items()])
            copies = found - Counter({status_key(t.status, t.queue): 1 for t in templates.values()})
            totals = _event_totals(kinds, copies)
            conn.execute(upsert, [{"key": event_key(kind), "n": c} for kind, c in totals.items()])
            for width, kept_s in HISTORY_WIDTHS.items():
                conn.execute(text(_history_sql(dialect, ids, width, now - kept_s)))
            for width in HISTORY_WIDTHS:  # as trim_history leaves them (store/counters.py, "roll-up")
                if width != NARROW:
                    current = int(bucket_of(now, width))
                    conn.execute(
                        text(f"DELETE FROM {history.name} WHERE width = {width} AND bucket >= {current}")
                    )
                    conn.execute(upsert, [{"key": rolled_key(width), "n": current}])
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE" if dialect == "postgresql" else "ANALYZE"))
    finally:
        engine.dispose()
