"""The flow-control half of the store contract: queue limits decided in the
claim, job dependencies released by the ack of the last parent, batches and
chains. A store that has not built it yet refuses every call with
FlowUnsupported (and ``SharedStore`` refuses an enqueue that needs it), so a
limit or a dependency is never silently ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from store.errors import ValidationError
from store.flow_rules import QueueLimits, Usage
from store.models import Job, JobSpec

#: Job ids a batch lists (``Batch.job_ids``): the first ones, in enqueue order.
BATCH_IDS_SHOWN = 1000


class FlowUnsupported(ValidationError):
    """This store does not implement flow control (yet)."""

    def __init__(self, what: str) -> None:
        super().__init__(what, "flow control (limits, dependencies, batches) is not built on this store yet")


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch or chain: ``kind`` ("batch" or "chain"), its jobs' ids in
    order, the callback job's id (None without one), ``counts`` of its jobs
    by status name, ``finished`` when none is Queued, Scheduled or InProgress
    (the callback not counted), when an operator canceled it; ``job_ids``
    the first BATCH_IDS_SHOWN of its jobs' ids in enqueue order (the
    callback's apart, deleted jobs left out), ``created_at`` epoch seconds of the store's clock."""

    id: str
    kind: str
    size: int
    callback_job_id: str | None
    counts: dict[str, int] = field(default_factory=dict)
    finished: bool = False
    created_at: float | None = None
    canceled_at: float | None = None
    canceled_by: str | None = None
    job_ids: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "size": self.size,
            "counts": self.counts,
            "callback_job_id": self.callback_job_id,
            "finished": self.finished,
            "canceled_by": self.canceled_by,
            "job_ids": self.job_ids[:BATCH_IDS_SHOWN],
            "created_at": self.created_at,
        }


class FlowContract:
    """Flow control operations; every method of a store without it raises
    FlowUnsupported."""

    #: True on a store that implements this contract.
    supports_flow: ClassVar[bool] = False

    def set_queue_limits(self, queue: str, limits: QueueLimits, *, actor: str = "operator") -> QueueLimits:
        """Store ``queue``'s limits (all None clears them), audited as
        QUEUE_LIMITS_SET by ``actor``. Workers see them at their next claim."""
        raise FlowUnsupported("limits")

    def queue_limits(self) -> dict[str, QueueLimits]:
        """Every queue with a limit set, by name."""
        raise FlowUnsupported("limits")

    def limit_usage(self, queue: str) -> Usage:
        """What ``queue`` uses of its limits now (running, starts in the window)."""
        raise FlowUnsupported("limits")

    def limit_hold(self, job: Job) -> tuple[str, str] | None:
        """The limit that holds a due job now, ``(kind, explanation)`` as
        ``store.flow_rules.hold`` says (e.g. ``("concurrency", "concurrency limit
        3: 3 running")``), or None when none does."""
        raise FlowUnsupported("limits")

    def claim_retry_after(self, worker_id: str) -> float | None:
        """Seconds until a rate limit that held jobs from ``worker_id``'s
        last claim allows a start again (None: no rate limit held any)."""
        return None

    def create_batch(
        self, specs: Sequence[JobSpec], callback: JobSpec | None = None, *, kind: str = "batch"
    ) -> Batch:
        """Enqueue ``specs`` as one batch (``kind="chain"``: each waits for
        the one before) and ``callback`` waiting for all of them with
        ``on_parent_failure="run"``, in one atomic unit. The batch's id is
        on every job (``batch_id``) and on the callback's parents' results."""
        raise FlowUnsupported("batch")

    def get_batch(self, batch_id: str) -> Batch:
        """A batch with its counts. Raises JobNotFound (naming the batch)."""
        raise FlowUnsupported("batch")

    def batch_jobs(self, batch_id: str, limit: int = 100) -> list[Job]:
        """The first ``limit`` jobs of a batch, in enqueue order."""
        raise FlowUnsupported("batch")

    def list_batches(self, limit: int = 50, cursor: str | None = None) -> tuple[list[Batch], str | None]:
        """Batches newest first, ``limit`` (1..200) a page after ``cursor`` (the
        ``next_cursor`` of the page before), with their counts; and the next
        page's cursor (None on the last page). Raises ValidationError naming
        ``limit`` or ``cursor`` (store/batch_list.py)."""
        raise FlowUnsupported("batch")

    def cancel_batch(self, batch_id: str, *, actor: str = "operator") -> Batch:
        """Cancel every job of the batch not yet finished (InProgress ones
        too: their acks are refused) and the callback, audited."""
        raise FlowUnsupported("batch")

    def parents(self, job_id: str) -> list[Job]:
        """The jobs ``job_id`` depends on (empty when none)."""
        raise FlowUnsupported("depends_on")

    def children(self, job_id: str, limit: int = 100) -> list[Job]:
        """The jobs that depend on ``job_id``."""
        raise FlowUnsupported("depends_on")
