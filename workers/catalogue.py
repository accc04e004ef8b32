"""Handlers known to every process: what a worker publishes, and the
defaults a producer applies to a job it enqueues by name.

A worker publishes the handlers it serves in its registry entry
(``published``); the store's catalogue (``store.catalogue``) is derived from
the live workers' entries. A producer takes a handler's queue, max_retries
and timeout from the handler module when it has loaded it, else from the
catalogue; options the caller gave win (``with_defaults``). Where the
handler set is known (a loaded module, or a catalogue with entries) an
unknown name is refused (ValidationError naming ``name``); where nothing is
known yet the job is accepted as it is.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Collection, Mapping
from typing import Any

from store.base import JobStore
from store.catalogue import HandlerEntry, catalogue
from store.errors import ValidationError
from store.models import JobSpec
from workers import hooks
from workers.handlers import HandlerSpec, registry
from workers.periodic import declared

#: The JobSpec options a handler gives defaults for.
DEFAULTED = ("queue", "max_retries", "timeout_s")
#: Seconds a producer keeps a catalogue it read (a web process reads the
#: registry at most this often, not once per enqueue).
CACHE_S = 2.0


def published(queues: Collection[str], lease_ttl_s: float) -> list[dict[str, Any]]:
    """The registry entry's ``handlers`` of a worker serving ``queues`` with
    ``lease_ttl_s``: every loaded handler whose queue it serves."""
    schedules = {p.handler: p.cron for p in declared()}
    return [
        {
            "name": spec.name,
            "queue": spec.queue,
            "max_retries": spec.max_retries,
            "timeout_s": spec.timeout_s,
            "lease_ttl_s": lease_ttl_s,
            "schedule": schedules.get(spec.name),
            "max_snoozes": spec.max_snoozes,
        }
        for name, spec in sorted(registry().items())
        if spec.queue in queues
    ]


class Catalogue:
    """A producer's view of the handler set: ``loaded`` (the handlers of the
    modules it imported: the CLI passes the registry when LEASEHOLD_HANDLERS
    names modules; the web app none), then the store's catalogue, read at
    most every ``cache_s`` seconds."""

    def __init__(
        self, store: JobStore, loaded: Mapping[str, HandlerSpec] | None = None, cache_s: float = CACHE_S
    ) -> None:
        self.store = store
        self.loaded: Mapping[str, HandlerSpec] = loaded or {}
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


def enqueue(name: str, payload: Any = None, *, store: JobStore | None = None, **options: Any) -> Any:
    """Enqueue a job by handler name from Python, with its handler's defaults
    (the handlers this process loaded, else the store's catalogue) under the
    ``options`` given (JobSpec fields). Returns the Job. Raises
    ValidationError naming ``name`` when the handler set is known and lacks
    it, or naming a bad option."""
    from workers.enqueueing import default_store

    target = store or default_store()
    spec = Catalogue(target, registry()).with_defaults(JobSpec(name, payload, **options), set(options))
    job, created = target.enqueue_idempotent(spec)
    if created:
        hooks.send(hooks.job_enqueued, job.name, job=job)
    return job


def run_now_spec(store: JobStore, schedule: Any) -> JobSpec:
    """The job of a stored periodic schedule run by hand (console, API): its
    handler, payload and queue, with the handler's retries and timeout from
    the catalogue (an unknown handler is enqueued as it is)."""
    spec = JobSpec(schedule.handler, schedule.payload, queue=schedule.queue)
    given = {"queue"} if schedule.queue else set()
    return Catalogue(store, cache_s=0).with_defaults(spec, given, refuse_unknown=False)
