"""The handler catalogue: which handlers the live workers serve, with their
enqueue defaults, derived from the worker registry (each worker publishes
its handlers in its entry, ``WorkerInfo.handlers``, at every heartbeat).

An entry lives as long as some live worker serves its handler: a worker that
stops leaves the registry, a dead one stops counting once its heartbeat is
older than ALIVE_TTLS lease TTLs. Producers that have not imported the
handler modules (the HTTP API, the console, the CLI without
LEASEHOLD_HANDLERS) apply their defaults through ``Catalogue``.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from store.base import JobStore
from store.errors import ValidationError
from store.models import JobSpec
from store.records import WorkerInfo

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
    defaults win."""

    name: str
    queue: str
    max_retries: int | None
    timeout_s: float | None
    lease_ttl_s: float | None
    schedule: str | None
    max_snoozes: int | None
    workers: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "queue": self.queue,
            "max_retries": self.max_retries,
            "timeout_s": self.timeout_s,
            "lease_ttl_s": self.lease_ttl_s,
            "schedule": self.schedule,
            "max_snoozes": self.max_snoozes,
            "workers": list(self.workers),
        }


def is_live(worker: WorkerInfo, now_s: float, lease_ttl_s: float) -> bool:
    """Whether ``worker`` heartbeated within ALIVE_TTLS lease TTLs of ``now_s``
    (the longer of ``lease_ttl_s`` and the TTL it published)."""
    if worker.last_seen_at is None:
        return False
    ttls = [float(h["lease_ttl_s"]) for h in worker.handlers if h.get("lease_ttl_s")]
    ttl = max([lease_ttl_s, *ttls])
    return now_s - worker.last_seen_at.timestamp() <= ALIVE_TTLS * ttl


def build(workers: Iterable[WorkerInfo], now_s: float, lease_ttl_s: float) -> dict[str, HandlerEntry]:
    """The catalogue of ``workers`` (a registry read) at the store time ``now_s``, by name."""
    live = [w for w in workers if is_live(w, now_s, lease_ttl_s)]
    live.sort(key=lambda w: w.last_seen_at.timestamp() if w.last_seen_at else 0.0)
    entries: dict[str, HandlerEntry] = {}
    for worker in live:  # oldest first: the newest worker's defaults win
        for h in worker.handlers:
            name = h.get("name")
            if not isinstance(name, str):
                continue
            serving = entries[name].workers if name in entries else ()
            entries[name] = HandlerEntry(
                name=name,
                queue=str(h.get("queue") or "default"),
                max_retries=h.get("max_retries"),
                timeout_s=h.get("timeout_s"),
                lease_ttl_s=h.get("lease_ttl_s"),
                schedule=h.get("schedule"),
                max_snoozes=h.get("max_snoozes"),
                workers=(*serving, worker.id),
            )
    return dict(sorted(entries.items()))


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
