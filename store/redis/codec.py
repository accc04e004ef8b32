"""Redis hashes and JSON texts of the Redis store to contract models and back.

Hash values are text: integers in decimal, times as epoch seconds written by
Lua (Redis TIME's own digits, "<seconds>.<6 digits>", or with a clock offset
17 significant digits: either reads back as the double the function used),
JSON fields as JSON. A field that is absent is None.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson

from store import lifecycle
from store.base import StoreSettings
from store.lifecycle import EventKind, JobStatus, Operation
from store.models import (
    Attempt,
    Job,
    JobEvent,
    JobSpec,
    QueueState,
    ts,
)
from store.spec import unique_key_of

_JSON_FIELDS = ("payload", "headers", "route_params", "query_params")
#: The status code of a leased job (InProgress), as hashes hold it.
_LEASED = str(int(lifecycle.target(Operation.CLAIM)))


def dumps(value: Any) -> str:
    """JSON text (orjson). Raises TypeError for a value that is not JSON."""
    return orjson.dumps(value).decode()


#: JSON ``null``: what a job hash holds for a None result (the field is
#: written, unlike the optional fields enqueue leaves out).
NULL = dumps(None)


def flat_to_dict(flat: Sequence[str]) -> dict[str, str]:
    """A flat ``HGETALL`` array (as a script returns it) as a dict."""
    it = iter(flat)
    return dict(zip(it, it, strict=True))


#: The hash fields every new job has, passed in this order after a job's
#: status and delay (lua/enqueue.lua reads them; ``enqueue_values``).
ENQUEUE_FIXED = ("id", "name", "queue", "max_retries", "timeout_seconds")
#: The values a job may have, each passed only when it has it, after a text
#: of their letters (``a`` the first of this list, ``b`` the second...):
#: hash fields, then ``unique_for`` (seconds the unique key is held; not a
#: hash field). The library has this list compiled in
#: (store/redis/scripts.py ``enqueue_table``).
ENQUEUE_OPTIONAL = (
    "priority",
    "lease_ttl_seconds",
    "idempotency_key",
    *_JSON_FIELDS,
    "unique_key",
    "expires_at",
    "unique_for",
)
#: (letter, name) of each ENQUEUE_OPTIONAL value.
ENQUEUE_LETTERED = tuple((chr(ord("a") + i), name) for i, name in enumerate(ENQUEUE_OPTIONAL))


def delay_text(delay_s: float) -> str:
    """A job's delay as lua/enqueue.lua takes it: ``"0"`` for none (read with
    no ``tonumber``), else seconds as ``repr`` of a float."""
    return repr(float(delay_s)) if delay_s > 0 else "0"


def enqueue_values(
    fields: Mapping[str, str], status: int, delay: str, unique_for: str | None
) -> list[str | int]:
    """The ARGV values of one job for lua/enqueue.lua: ``status`` (code),
    ``delay`` (seconds, text), the ENQUEUE_FIXED fields of ``fields``
    (``spec_fields``), the letters of the ENQUEUE_OPTIONAL values it has, then
    those values in that order. A job with no option is 8 values: every ARGV
    element costs the server about 1k instructions, an empty one too."""
    out: list[str | int] = [status, delay, *(fields[name] for name in ENQUEUE_FIXED), ""]
    letters = []
    for letter, name in ENQUEUE_LETTERED:
        value = unique_for if name == "unique_for" else fields.get(name)
        if value is not None:
            letters.append(letter)
            out.append(value)
    out[len(ENQUEUE_FIXED) + 2] = "".join(letters)
    return out


def spec_fields(spec: JobSpec, job_id: str, settings: StoreSettings) -> dict[str, str]:
    """The ENQUEUE_FIELDS of a new job (those that are null, and priority 0,
    left out: an absent priority reads as 0); the script adds status, times
    and rank, and leaves the zero counters out (absent reads as 0). ``unique_key`` is
    ``unique_key_of(spec)``: kept in the hash so a removal frees the key."""
    out = {
        "id": job_id,
        "name": spec.name,
        "queue": spec.queue,
        "max_retries": str(settings.max_retries if spec.max_retries is None else spec.max_retries),
        "timeout_seconds": repr(float(settings.job_timeout_s if spec.timeout_s is None else spec.timeout_s)),
    }
    if spec.priority:
        out["priority"] = str(spec.priority)
    if spec.lease_ttl_s is not None:
        out["lease_ttl_seconds"] = repr(float(spec.lease_ttl_s))
    if spec.idempotency_key is not None:
        out["idempotency_key"] = spec.idempotency_key
    for name in _JSON_FIELDS:
        value = getattr(spec, name)
        if value is not None:
            out[name] = dumps(value)
    unique = unique_key_of(spec)
    if unique is not None:
        out["unique_key"] = unique
    if spec.expires_at is not None:  # epoch seconds once the store resolved it (store.spec.resolve_times)
        out["expires_at"] = repr(float(spec.expires_at))  # type: ignore[arg-type]
    return out


def flow_fields(spec: JobSpec) -> dict[str, str]:
    """The hash fields of a job that uses flow control (lua/enqueue_flow.lua):
    its limit key, batch, and for a child the policy of a failed parent."""
    out = {}
    if spec.limit_key is not None:
        out["limit_key"] = spec.limit_key
    if spec.batch_id is not None:
        out["batch_id"] = spec.batch_id
    if spec.depends_on:
        out["on_parent_failure"] = spec.on_parent_failure or "cancel"
    return out


def _float(h: Mapping[str, str], name: str) -> float | None:
    value = h.get(name)
    return None if value is None else float(value)


def _json(h: Mapping[str, str], name: str) -> Any:
    value = h.get(name)
    return None if value is None else orjson.loads(value)


def _heartbeat(h: Mapping[str, str]) -> float | None:
    """``last_heartbeat_at``: the later of the field and ``started_at`` (a
    claim leaves it out, its first heartbeat being its start; one older than
    the start is an earlier run's: store/redis/scripts.py IMPLIED_STAMPS)."""
    beat, started = _float(h, "last_heartbeat_at"), _float(h, "started_at")
    return started if beat is None or (started is not None and started > beat) else beat


def job_from_hash(job_id: str, h: Mapping[str, str]) -> Job:
    """The hash of job ``job_id`` as a Job. Since key layout 6 a hash leaves
    out what its key or another field says (store/redis/layout.py): ``id``
    (the key's), ``last_updated_at`` of a job not changed since its enqueue
    (its ``created_at``), ``last_heartbeat_at`` until the run's first
    heartbeat (``_heartbeat``); and it keeps ``lease_expires_at`` after the
    lease ends (read only while InProgress: store/redis/scripts.py
    ``KEPT_CLEARS``)."""
    return Job(
        id=job_id,
        name=h["name"],
        queue=h["queue"],
        status=JobStatus(int(h["status"])),
        payload=_json(h, "payload"),
        priority=int(h.get("priority", 0)),
        headers=_json(h, "headers"),
        route_params=_json(h, "route_params"),
        query_params=_json(h, "query_params"),
        result=_json(h, "result"),
        error=_json(h, "error"),
        retry_count=int(h.get("retry_count", 0)),
        max_retries=int(h["max_retries"]),
        lease_expirations=int(h.get("lease_expirations", 0)),
        retry_delay_until=ts(_float(h, "retry_delay_until")),
        worker_id=h.get("worker_id"),
        lease_token=int(h.get("lease_token", 0)),
        lease_expires_at=ts(_float(h, "lease_expires_at")) if h["status"] == _LEASED else None,
        last_heartbeat_at=ts(_heartbeat(h)),
        timeout_seconds=float(h["timeout_seconds"]),
        lease_ttl_seconds=_float(h, "lease_ttl_seconds"),
        created_at=ts(_float(h, "created_at")),
        started_at=ts(_float(h, "started_at")),
        completed_at=ts(_float(h, "completed_at")),
        last_updated_at=ts(_float(h, "last_updated_at" if "last_updated_at" in h else "created_at")),
        idempotency_key=h.get("idempotency_key"),
        progress=_json(h, "progress"),
        limit_key=h.get("limit_key"),
        batch_id=h.get("batch_id"),
        pending_parents=int(h["pending_parents"]) if "pending_parents" in h else None,
        on_parent_failure=h.get("on_parent_failure"),
        expires_at=ts(_float(h, "expires_at")),
    )


def new_job(fields: Mapping[str, str], status: JobStatus, times: Mapping[str, datetime | None]) -> Job:
    """A job lua/enqueue.lua wrote, as ``job_from_hash`` reads its hash back:
    ``fields`` its ENQUEUE_FIELDS (``spec_fields``; JSON decoded from the
    text stored), ``times`` the times ENQUEUE's row gave it
    (``lifecycle.enqueue_times``, as datetimes), every other field empty or
    zero. A bulk enqueue builds thousands: no hash to fill and parse again."""
    return Job(
        id=fields["id"],
        name=fields["name"],
        queue=fields["queue"],
        status=status,
        payload=_json(fields, "payload"),
        priority=int(fields.get("priority", 0)),
        headers=_json(fields, "headers"),
        route_params=_json(fields, "route_params"),
        query_params=_json(fields, "query_params"),
        max_retries=int(fields["max_retries"]),
        retry_delay_until=times.get("retry_delay_until"),
        timeout_seconds=float(fields["timeout_seconds"]),
        lease_ttl_seconds=_float(fields, "lease_ttl_seconds"),
        created_at=times.get("created_at"),
        last_updated_at=times.get("last_updated_at"),
        idempotency_key=fields.get("idempotency_key"),
        expires_at=ts(_float(fields, "expires_at")),
    )


def job_from_flat(job_id: str, flat: Sequence[str]) -> Job:
    """Job ``job_id`` from the flat ``HGETALL`` array of its hash returned by
    a script."""
    return job_from_hash(job_id, flat_to_dict(flat))


_CLAIM = lifecycle.rule(Operation.CLAIM)


def claim_entry(entry: str | bytes) -> tuple[str, list[str], str, str, str]:
    """``(job id, flat hash, lease_token, lease_expires_at, now)`` of a
    claim's reply entry (lib/claim.lua ``claim_jobs``): the JSON text of the
    last four and the id, the hash the job's flat HGETALL array from before
    the claim. An entry of layout 5 (four values, pushed on a hand-over list
    before an upgrade) has the id in its hash."""
    flat, token, expires, now, *rest = orjson.loads(entry)
    job_id = rest[0] if rest else flat_to_dict(flat)["id"]
    return job_id, flat, token, expires, now


def claimed_job(entry: str | bytes, worker_id: str) -> Job:
    """A job lib/claim.lua leased, from its reply entry (``claim_entry``):
    its hash as it was before the claim, to which the claim's row of the
    lifecycle table is
    applied here as the function applied it to the stored hash (status, its
    stamps and last_updated_at = now, its clears dropped, the lease and
    ``worker_id`` written), so the reply carries no field the claim wrote."""
    job_id, flat, token, expires, now = claim_entry(entry)
    h = flat_to_dict(flat)
    for field in _CLAIM.clears:
        h.pop(field, None)
    for field in _CLAIM.stamps:
        h[field] = now
    h.update(status=_LEASED, last_updated_at=now, worker_id=worker_id)
    h.update(lease_token=token, lease_expires_at=expires)
    return job_from_hash(job_id, h)


def event_from_json(text: str, job_id: str | None = None) -> JobEvent:
    """An entry of a job's event list (``job_id`` given) or of the audit list
    (which carries the job id); both written by lua/lib/job.lua."""
    e = orjson.loads(text)
    return JobEvent(
        job_id=job_id or e["job"],
        at=ts(float(e["at"])),  # type: ignore[arg-type]
        kind=e["kind"],
        from_status=JobStatus(e["from"]) if "from" in e else None,
        to_status=JobStatus(e["to"]) if "to" in e else None,
        actor=e.get("actor"),
        token=e.get("token"),
        message=e.get("message"),
    )


#: Job-hash fields the happy path's events are derived from (lua/lib/job.lua
#: ``happen`` and ``settle``), in ``derived_events``'s order.
DERIVED_FIELDS = (
    "created_at",
    "enqueued_as",
    "run",
    "claimed_from",
    "started_at",
    "worker_id",
    "lease_token",
    "completed_at",
    "completed_by",
)
#: ``run`` values: the current run's claimed event, or it and its completed event.
RUN_CLAIMED, RUN_COMPLETED = "1", "2"


def derived_events(job_id: str, h: Mapping[str, str | None]) -> tuple[list[JobEvent], list[JobEvent]]:
    """The events the job hash ``h`` (DERIVED_FIELDS) stands for, as the
    functions would have appended them: ``(before the list, after it)`` =
    ``([enqueued] or [], [claimed], [claimed, completed] or [])``. A job
    written by a version that appended them has neither field: ``([], [])``."""

    def at(name: str) -> Any:
        return ts(float(h[name] or 0))

    first: list[JobEvent] = []
    last: list[JobEvent] = []
    if h.get("enqueued_as") and h.get("created_at"):
        to = JobStatus(int(h["enqueued_as"] or 0))
        first.append(JobEvent(job_id, at("created_at"), EventKind.ENQUEUED.value, None, to, None, 0, None))
    run = h.get("run")
    if run in (RUN_CLAIMED, RUN_COMPLETED):
        token = int(h.get("lease_token") or 0)
        source, running = JobStatus(int(h["claimed_from"] or 0)), JobStatus.InProgress
        claimed = EventKind.CLAIMED.value
        last.append(
            JobEvent(job_id, at("started_at"), claimed, source, running, h.get("worker_id"), token, None)
        )
        if run == RUN_COMPLETED:
            # absent since layout 6 when the lease holder acked (lib/ack.lua); '' for nobody
            by = h.get("completed_by")
            actor, done = (h.get("worker_id") if by is None else by) or None, JobStatus.Completed
            completed = EventKind.COMPLETED.value
            last.append(JobEvent(job_id, at("completed_at"), completed, running, done, actor, token, None))
    return first, last


def attempt_from_json(text: str) -> Attempt:
    """An entry of a job's attempts list (lua/apply_failures.lua): times as
    text, the error as its JSON text."""
    a = orjson.loads(text)
    return Attempt(
        attempt=int(a["attempt"]),
        token=int(a["token"]),
        worker_id=a.get("worker_id"),
        error=_json(a, "error"),
        started_at=ts(_float(a, "started_at")),
        finished_at=ts(_float(a, "finished_at")),
    )


def queue_state_from_json(name: str, text: str) -> QueueState:
    """A field of the queues hash (lua/queue_state.lua) as a QueueState."""
    s = orjson.loads(text)
    return QueueState(name, bool(s["paused"]), s.get("changed_by"), ts(float(s["changed_at"])))
