"""Handlers known to every process, the worker's side: what a worker
publishes, and enqueue by name with the defaults of the handlers this process
loaded (``store.catalogue.Catalogue`` applies them).

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

from collections.abc import Collection
from typing import Any

from store.base import JobStore
from store.catalogue import Catalogue
from store.models import JobSpec
from workers.handlers import registry
from workers.periodic import declared


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
            **spec.policy_json(),
        }
        for name, spec in sorted(registry().items())
        if spec.queue in queues
    ]


def enqueue(
    name: str, payload: Any = None, *, store: JobStore | None = None, session: Any = None, **options: Any
) -> Any:
    """Enqueue a job by handler name from Python, with its handler's defaults
    (the handlers this process loaded, else the store's catalogue) under the
    ``options`` given (JobSpec fields). Returns the Job; with ``session`` (a
    SQLAlchemy session, e.g. Flask-SQLAlchemy's ``db.session``) the job
    belongs to its transaction (workers/sessions.py: on Redis a ``Pending``
    is returned, enqueued at commit). Raises ValidationError naming ``name``
    when the handler set is known and lacks it, or naming a bad option."""
    from workers.enqueueing import default_store, enqueue_spec

    target = store or default_store()
    spec = Catalogue(target, registry()).with_defaults(JobSpec(name, payload, **options), set(options))
    return enqueue_spec(target, spec, session)
