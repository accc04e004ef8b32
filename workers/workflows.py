"""Chains and batches from Python: ``chain`` runs jobs one after another,
``batch`` runs a group and then an optional callback job.

An item is a JobSpec, or a ``(handler, payload)`` / ``(handler, payload,
options)`` tuple where ``handler`` is a registered Handler (its declared
queue, retries and timeout apply) and ``options`` are JobSpec fields::

    from leasehold import batch, chain

    b = batch([(export, {"n": n}) for n in range(500)], callback=(summary, {"to": "ops"}))
    c = chain((fetch, {"url": u}), (parse, None), (store_rows, None))

Each returns the store's Batch (``id``, ``callback_job_id``, ``counts``).
The callback reads the batch's outcomes with ``ctx.parent_results()``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from store.base import JobStore
from store.contract_flow import Batch
from store.flow_rules import check_batch
from store.models import JobSpec, validate_spec
from workers.enqueueing import Handler, default_store
from workers.sessions import Pending, in_session


def as_job_spec(item: Any) -> JobSpec:
    """An item as a JobSpec. Raises TypeError naming what it accepts."""
    if isinstance(item, JobSpec):
        return item
    if isinstance(item, tuple) and 2 <= len(item) <= 3 and isinstance(item[0], Handler):
        options = item[2] if len(item) == 3 else {}
        return item[0].spec.job_spec(item[1], **options)
    raise TypeError("expected a JobSpec or (handler, payload[, options])")


def batch(
    items: Iterable[Any], callback: Any = None, *, store: JobStore | None = None, session: Any = None
) -> Batch | Pending[Batch]:
    """Enqueue ``items`` as one batch and ``callback`` (an item, or None) to
    run once all have finished, whatever their outcome, in one atomic unit.
    ``session``: a SQLAlchemy session whose transaction the batch belongs to
    (workers/sessions.py; on Redis a ``Pending``, created at commit).
    Raises ValidationError (nothing written), TypeError."""
    specs = [as_job_spec(i) for i in items]
    cb = as_job_spec(callback) if callback is not None else None
    return _create(store or default_store(), specs, cb, "batch", session)


def chain(*items: Any, store: JobStore | None = None, session: Any = None) -> Batch | Pending[Batch]:
    """Enqueue ``items`` so each waits for the one before; a failed or
    canceled step cancels the rest. ``session`` as for ``batch``. Raises
    ValidationError, TypeError."""
    return _create(store or default_store(), [as_job_spec(i) for i in items], None, "chain", session)


def _create(
    target: JobStore, specs: list[JobSpec], callback: JobSpec | None, kind: str, session: Any
) -> Batch | Pending[Batch]:
    if session is None:
        return target.create_batch(specs, callback, kind=kind)

    def check() -> None:
        check_batch(specs, kind)
        for spec in [*specs, *([callback] if callback is not None else [])]:
            validate_spec(spec)

    return in_session(target, session, lambda: (target.create_batch(specs, callback, kind=kind), []), check)
