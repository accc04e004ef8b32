"""The handler catalogue: which handlers the live workers serve, with their
enqueue defaults, derived from the worker registry (each worker publishes
its handlers in its entry, ``WorkerInfo.handlers``, at every heartbeat).

An entry lives as long as some live worker serves its handler: a worker that
stops leaves the registry, a dead one stops counting once its heartbeat is
older than ALIVE_TTLS lease TTLs. Producers that have not imported the
handler modules (the HTTP API, the console, the CLI without
LEASEHOLD_HANDLERS) apply their defaults through ``Catalogue``.

Every entry is checked when read (``parse_entry``): one a worker of another
version wrote malformed is skipped with one warning, so it never fails an
enqueue, ``/api/handlers`` or the console's handlers page.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from store.base import JobStore
from store.errors import ValidationError
from store.lifecycle import RetryPolicy
from store.models import JobSpec
from store.records import WorkerInfo
from store.spec import validate_spec

#: A worker counts as live while its last heartbeat is younger than this many
#: lease TTLs (its own, or the store's when longer).
ALIVE_TTLS = 3.0


@dataclass(frozen=True, slots=True)
class HandlerEntry:
    """One handler as the live workers publish it. ``max_retries`` and
    ``timeout_s`` are None where the handler leaves the store's default;
    ``lease_ttl_s`` is the serving workers' lease TTL (s); ``schedule`` its
    cron line, if periodic; ``workers``: ids of the live workers serving it.
    Where workers disagree (a rolling deploy), the most recently seen one's
    defaults win. Its retry policy: ``retry_base_s``, ``retry_max_delay_s``
    (s) and ``retry_jitter`` (fraction), None where the store's settings
    apply (``retry_policy``); ``retry_on`` and ``give_up_on``: the names of
    the exception types the worker classifies failures by (shown only: a
    worker decides them)."""

    name: str
    queue: str
    max_retries: int | None
    timeout_s: float | None
    lease_ttl_s: float | None
    schedule: str | None
    max_snoozes: int | None
    workers: tuple[str, ...]
    retry_base_s: float | None = None
    retry_max_delay_s: float | None = None
    retry_jitter: float | None = None
    retry_on: tuple[str, ...] = ()
    give_up_on: tuple[str, ...] = ()

    def retry_policy(self, default: RetryPolicy) -> RetryPolicy:
        """The backoff of this handler's retries: ``default`` (the store's)
        with the handler's own values where it published them."""
        return default.overridden(self.retry_base_s, self.retry_max_delay_s, self.retry_jitter)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "queue": self.queue,
            "max_retries": self.max_retries,
            "timeout_s": self.timeout_s,
            "lease_ttl_s": self.lease_ttl_s,
            "schedule": self.schedule,
            "max_snoozes": self.max_snoozes,
            "retry_base_s": self.retry_base_s,
            "retry_max_delay_s": self.retry_max_delay_s,
            "retry_jitter": self.retry_jitter,
            "retry_on": list(self.retry_on),
            "give_up_on": list(self.give_up_on),
            "workers": list(self.workers),
        }


#: Logs the first time a malformed entry is skipped (once per worker, handler and problem).
log = logging.getLogger("leasehold.catalogue")
#: What was warned about already, so a malformed entry read at every request
#: is logged once per process, not per request (at most WARNED_KEPT kept).
_warned: set[tuple[str, str, str]] = set()
_warned_lock = threading.Lock()
WARNED_KEPT = 1000


def _warn_once(worker_id: str, entry: Any, problem: str) -> None:
    name = entry.get("name") if isinstance(entry, Mapping) else None
    key = (worker_id, str(name)[:200], problem)
    with _warned_lock:
        if key in _warned:
            return
        if len(_warned) >= WARNED_KEPT:
            _warned.clear()
        _warned.add(key)
    log.warning("handler catalogue: skipped an entry of worker %s (handler %r): %s", worker_id, name, problem)


def _number_or_none(fld: str, value: Any, integer: bool) -> Any:
    """None, or ``value`` when it is an int (``integer``) or a finite number."""
    if value is None:
        return None
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value):
        raise ValidationError(fld, "must be an integer" if integer else "must be a number")
    return value


def parse_entry(entry: Any, worker_id: str) -> HandlerEntry:
    """One published handler (``workers.catalogue.published``'s shape) as a
    HandlerEntry served by ``worker_id``, checked by enqueue's own rule
    (``validate_spec``: name, queue, retries, timeout, lease TTL) since
    producers apply it to jobs. Raises ValidationError naming the field of
    an entry a worker of another version (or a bug) wrote malformed."""
    if not isinstance(entry, Mapping):
        raise ValidationError("entry", "must be an object")
    got = {k: entry.get(k) for k in ("max_retries", "max_snoozes")}
    for fld in got:
        got[fld] = _number_or_none(fld, got[fld], integer=True)
    timeout_s = _number_or_none("timeout_s", entry.get("timeout_s"), integer=False)
    lease_ttl_s = _number_or_none("lease_ttl_s", entry.get("lease_ttl_s"), integer=False)
    queue = entry.get("queue") or "default"
    spec = JobSpec(entry.get("name"), None, queue=queue, max_retries=got["max_retries"])  # type: ignore[arg-type]
    validate_spec(dataclasses.replace(spec, timeout_s=timeout_s, lease_ttl_s=lease_ttl_s))
    schedule = entry.get("schedule")
    if schedule is not None and not isinstance(schedule, str):
        raise ValidationError("schedule", "must be a cron line or null")
    if got["max_snoozes"] is not None and got["max_snoozes"] < 0:
        raise ValidationError("max_snoozes", "must be at least 0")
    return HandlerEntry(
        name=spec.name,
        queue=queue,
        max_retries=got["max_retries"],
        timeout_s=float(timeout_s) if timeout_s is not None else None,
        lease_ttl_s=float(lease_ttl_s) if lease_ttl_s is not None else None,
        schedule=schedule,
        max_snoozes=got["max_snoozes"],
        workers=(worker_id,),
        **_retry_fields(entry),
    )


#: The published retry policy's backoff fields, each None or within its bounds (RetryPolicy's).
RETRY_BOUNDS = {"retry_base_s": (0.0, None), "retry_max_delay_s": (0.0, None), "retry_jitter": (0.0, 1.0)}
#: Most exception type names kept per list, and the longest name.
MAX_EXCEPTION_NAMES = 50
MAX_EXCEPTION_NAME_CHARS = 200


def _retry_fields(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The retry policy of a published entry (absent fields: the store's
    defaults, as a worker of an earlier version publishes none). Raises
    ValidationError naming the field of a malformed one."""
    out: dict[str, Any] = {}
    for fld, (low, high) in RETRY_BOUNDS.items():
        value = _number_or_none(fld, entry.get(fld), integer=False)
        if value is not None and (value < low or (high is not None and value > high)):
            bounds = "must be >= 0" if high is None else f"must be within [{low:g}, {high:g}]"
            raise ValidationError(fld, bounds)
        out[fld] = None if value is None else float(value)
    for fld in ("retry_on", "give_up_on"):
        names = entry.get(fld) or []
        if (
            not isinstance(names, list)
            or len(names) > MAX_EXCEPTION_NAMES
            or not all(isinstance(n, str) and 0 < len(n) <= MAX_EXCEPTION_NAME_CHARS for n in names)
        ):
            wanted = f"must be a list of at most {MAX_EXCEPTION_NAMES} exception type names"
            raise ValidationError(fld, wanted)
        out[fld] = tuple(names)
    return out


def entries_of(worker: WorkerInfo) -> list[HandlerEntry]:
    """The well-formed handlers ``worker`` publishes; each malformed one is
    skipped with one warning (``parse_entry``), never failing the whole read."""
    out = []
    for entry in worker.handlers if isinstance(worker.handlers, list) else ():
        try:
            out.append(parse_entry(entry, worker.id))
        except ValidationError as exc:
            _warn_once(worker.id, entry, str(exc))
    return out


def is_live(
    worker: WorkerInfo, now_s: float, lease_ttl_s: float, entries: Iterable[HandlerEntry] = ()
) -> bool:
    """Whether ``worker`` heartbeated within ALIVE_TTLS lease TTLs of ``now_s``
    (the longer of ``lease_ttl_s`` and the TTL it published in ``entries``)."""
    if worker.last_seen_at is None:
        return False
    ttl = max([lease_ttl_s, *(e.lease_ttl_s for e in entries if e.lease_ttl_s)])
    return now_s - worker.last_seen_at.timestamp() <= ALIVE_TTLS * ttl


def build(workers: Iterable[WorkerInfo], now_s: float, lease_ttl_s: float) -> dict[str, HandlerEntry]:
    """The catalogue of ``workers`` (a registry read) at the store time ``now_s``,
    by name. Malformed entries are skipped (``entries_of``)."""
    published = [(w, entries_of(w)) for w in workers]
    live = [(w, e) for w, e in published if is_live(w, now_s, lease_ttl_s, e)]
    live.sort(key=lambda we: we[0].last_seen_at.timestamp() if we[0].last_seen_at else 0.0)
    entries: dict[str, HandlerEntry] = {}
    for worker, served in live:  # oldest first: the newest worker's defaults win
        for entry in served:
            serving = entries[entry.name].workers if entry.name in entries else ()
            entries[entry.name] = dataclasses.replace(entry, workers=(*serving, worker.id))
    return dict(sorted(entries.items()))


def retry_policies(workers: Iterable[WorkerInfo], default: RetryPolicy) -> dict[str, RetryPolicy]:
    """The retry policy of every handler a registered worker publishes, live
    or not (a worker that died still says the backoff of the jobs whose
    leases it lost), by name: ``default`` (the store's) under the handler's
    own values, the most recently seen worker's winning. Handlers no entry
    names are left out (``default`` applies to them). Malformed entries are
    skipped (``entries_of``). Recovery decides expired leases with it."""
    ordered = sorted(workers, key=lambda w: w.last_seen_at.timestamp() if w.last_seen_at else 0.0)
    return {e.name: e.retry_policy(default) for w in ordered for e in entries_of(w)}


def catalogue(store: JobStore) -> dict[str, HandlerEntry]:
    """The store's handler catalogue now (two reads: the clock, the registry)."""
    return build(store.workers(), store.now(), store.settings.lease_ttl_s)


#: The JobSpec options a handler gives defaults for.
DEFAULTED = ("queue", "max_retries", "timeout_s")
#: Seconds a producer keeps a catalogue it read (a web process reads the
#: registry at most this often, not once per enqueue).
CACHE_S = 2.0


class Catalogue:
    """A producer's view of the handler set: ``loaded`` (handler name ->
    an object with ``queue``, ``max_retries`` and ``timeout_s``: the handlers of the
    modules it imported: the CLI passes the registry when LEASEHOLD_HANDLERS
    names modules; the web app none), then the store's catalogue, read at
    most every ``cache_s`` seconds."""

    def __init__(
        self, store: JobStore, loaded: Mapping[str, Any] | None = None, cache_s: float = CACHE_S
    ) -> None:
        self.store = store
        self.loaded: Mapping[str, Any] = loaded or {}
        self.cache_s = cache_s
        self._entries: dict[str, HandlerEntry] = {}
        self._read_at = -float("inf")
        self._lock = threading.Lock()

    def entries(self) -> Mapping[str, HandlerEntry]:
        """The store's catalogue (cached ``cache_s``)."""
        with self._lock:
            if time.monotonic() - self._read_at >= self.cache_s:
                self._entries = catalogue(self.store)
                self._read_at = time.monotonic()
            return self._entries

    def with_defaults(self, spec: JobSpec, given: Collection[str], *, refuse_unknown: bool = True) -> JobSpec:
        """``spec`` with the handler's defaults for the options not in
        ``given`` (JobSpec field names the caller set). Raises ValidationError
        naming ``name`` when the handler set is known and lacks it (unless
        ``refuse_unknown`` is false: ``spec`` comes back as it is)."""
        source: Any = self.loaded.get(spec.name)
        if source is None:
            entries = self.entries()
            source = entries.get(spec.name)
            if source is None:
                if refuse_unknown and (self.loaded or entries):
                    known = sorted({*self.loaded, *entries})
                    shown = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "")
                    raise ValidationError("name", f"no handler named {spec.name!r} is known (known: {shown})")
                return spec
        changes = {}
        for option in DEFAULTED:
            value = getattr(source, option)
            if option not in given and value is not None:
                changes[option] = value
        return dataclasses.replace(spec, **changes) if changes else spec


def run_now_spec(store: JobStore, schedule: Any) -> JobSpec:
    """The job of a stored periodic schedule run by hand (console, API): its
    handler, payload and queue, with the handler's retries and timeout from
    the catalogue (an unknown handler is enqueued as it is)."""
    spec = JobSpec(schedule.handler, schedule.payload, queue=schedule.queue)
    given = {"queue"} if schedule.queue else set()
    return Catalogue(store, cache_s=0).with_defaults(spec, given, refuse_unknown=False)
