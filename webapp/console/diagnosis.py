"""Why isn't this job running? Pure answers from a job, the clock and the worker registry.

No I/O: the view reads the store and passes what it read. Each status has
one explainer (a table keyed by the enum, not an if/elif chain); terminal
statuses have no answer because nothing is waiting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from store.catalogue import entries_of
from store.lifecycle import JobStatus
from store.models import Job, QueueState, WorkerInfo

#: A worker counts as alive while its last heartbeat is younger than this many lease TTLs.
ALIVE_TTLS = 3.0
#: A live worker is overdue once its last heartbeat is older than this many lease TTLs: it
#: beats every third of a TTL, so it has missed one beat and its leases are about to lapse.
OVERDUE_TTLS = 2 / 3


@dataclass(frozen=True, slots=True)
class Reason:
    """One line of the answer. ``tone`` is a CSS hint: ``info``, ``warn`` or ``bad``.
    ``seconds`` (if set) is a live countdown the page keeps ticking."""

    tone: str
    text: str
    seconds: float | None = None


@dataclass(frozen=True, slots=True)
class Context:
    """What the explainers need besides the job.

    now_s: the store's clock (epoch seconds).
    workers: the whole registry (alive or not).
    lease_ttl_s: the deployment's lease TTL (liveness threshold is ALIVE_TTLS of it).
    recovery_interval_s: how often recovery runs in the workers.
    queued_in_queue: jobs currently Queued in the job's queue (from the counters).
    queue_state: the pause state of the job's queue (None: never paused).
    """

    now_s: float
    workers: Sequence[WorkerInfo]
    lease_ttl_s: float
    recovery_interval_s: float
    queued_in_queue: int
    queue_state: QueueState | None = None
    #: The queue limit that holds a due job now, ``(kind, explanation)`` (store.flow_rules.hold).
    limit: tuple[str, str] | None = None


def epoch(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def queue_names(worker: WorkerInfo) -> list[str]:
    """Queues a worker serves; a weight suffix (``mail:3``) is dropped."""
    return [q.split(":", 1)[0] for q in worker.queues]


def is_alive(worker: WorkerInfo, now_s: float, lease_ttl_s: float) -> bool:
    """Alive while its last heartbeat is within ALIVE_TTLS lease TTLs of ``now_s``."""
    seen = epoch(worker.last_seen_at)
    return seen is not None and now_s - seen <= ALIVE_TTLS * lease_ttl_s


def is_overdue(worker: WorkerInfo, now_s: float, lease_ttl_s: float) -> bool:
    """True when the last heartbeat is older than OVERDUE_TTLS lease TTLs of ``now_s``
    (a silent worker, past ALIVE_TTLS, is overdue too)."""
    seen = epoch(worker.last_seen_at)
    return seen is None or now_s - seen > OVERDUE_TTLS * lease_ttl_s


def _ago(seconds: float) -> str:
    return f"{seconds:.0f} s ago" if seconds < 120 else f"{seconds / 60:.0f} min ago"


def _when(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC")


def _worker_line(job: Job, ctx: Context, held: bool = False) -> list[Reason]:
    """Is a live worker serving the job's queue, and does it have room? ``held``:
    a pause or a limit keeps the job back, so a free slot does not mean a claim."""
    live = [w for w in ctx.workers if is_alive(w, ctx.now_s, ctx.lease_ttl_s)]
    serving = [w for w in live if job.queue in queue_names(w)]
    if not serving:
        if not live:
            limit = ALIVE_TTLS * ctx.lease_ttl_s
            return [Reason("bad", f"No live worker at all: none has heartbeated in the last {limit:.0f} s.")]
        served = sorted({q for w in live for q in queue_names(w)})
        return [
            Reason(
                "bad",
                f"No live worker serves queue '{job.queue}' "
                f"({len(live)} live worker(s) serve: {', '.join(served) or 'nothing'}).",
            )
        ]
    publishing = [w for w in live if w.handlers]  # workers that say which handlers they serve
    if publishing and not any(e.name == job.name for w in publishing for e in entries_of(w)):
        return [
            Reason(
                "bad",
                f"No live worker serves handler '{job.name}': a worker that claims the job gives it back "
                "(no retry spent) until LEASEHOLD_UNKNOWN_HANDLER_GRACE, then fails it.",
            )
        ]
    slots = sum(max(w.concurrency, 1) for w in serving)
    busy = sum(len(w.jobs_in_hand) for w in serving)
    others = max(ctx.queued_in_queue - (1 if job.status is JobStatus.Queued else 0), 0)
    lines = [
        Reason(
            "info",
            f"{len(serving)} live worker(s) serve '{job.queue}' with {busy} of {slots} slots busy.",
        )
    ]
    if others:
        lines.append(
            Reason(
                "warn" if busy >= slots else "info",
                f"Queued behind up to {others} other job(s) in '{job.queue}' "
                "(claim order is priority, then due time).",
            )
        )
    elif busy < slots and not held:
        lines.append(Reason("info", "A worker has a free slot: it should claim this job at its next poll."))
    return lines


def _paused_line(job: Job, ctx: Context) -> list[Reason]:
    """ "queue paused by ann at 14:02" when the job's queue is paused (no claim takes it)."""
    state = ctx.queue_state
    if state is None or not state.paused:
        return []
    who = (state.changed_by or "an operator").removeprefix("operator:").split("#", 1)[0]
    when = (
        f" at {state.changed_at.strftime('%H:%M')} UTC ({state.changed_at:%Y-%m-%d})"
        if state.changed_at
        else ""
    )
    return [
        Reason(
            "bad",
            f"Queue '{job.queue}' paused by {who}{when}: no worker claims its jobs until it is resumed.",
        )
    ]


def _limit_line(job: Job, ctx: Context) -> list[Reason]:
    """ "held by the queue's concurrency limit 3: 3 running" when a limit holds it."""
    if ctx.limit is None:
        return []
    kind, why = ctx.limit
    after = "a running job finishes" if "concurrency" in kind else "the window allows another start"
    return [Reason("warn", f"Held by a limit of queue '{job.queue}' ({why}); it starts when {after}.")]


def _queued(job: Job, ctx: Context) -> list[Reason]:
    held = [*_paused_line(job, ctx), *_limit_line(job, ctx)]
    waiting = [] if held else [Reason("info", "Queued and due now; waiting to be claimed.")]
    return [*held, *waiting, *_worker_line(job, ctx, held=bool(held))]


def _waiting(job: Job) -> list[Reason]:
    n = job.pending_parents or 0
    return [Reason("info", f"Waiting for {n} parent job(s) to finish: the last one's end makes it Queued.")]


def _scheduled(job: Job, ctx: Context) -> list[Reason]:
    if job.pending_parents:
        return _waiting(job)
    due = job.retry_delay_until
    due_s = epoch(due)
    if due is not None and due_s is not None and due_s > ctx.now_s:
        wait = due_s - ctx.now_s
        if job.retry_count > 0 and job.error:
            err = job.error or {}
            cause = f"{err.get('type') or 'error'}: {err.get('message') or ''}".strip().rstrip(":")
            text = (
                f"Backoff pending after {job.retry_count} failure(s) (last: {cause}); "
                f"retry {job.retry_count} of {job.max_retries} is due at {_when(due)}, in"
            )
        else:
            text = f"Scheduled for later: due at {_when(due)}, in"
        return [*_paused_line(job, ctx), Reason("info", text, seconds=wait)]
    paused = _paused_line(job, ctx)
    lines = (
        [] if paused else [Reason("info", "Due now (a retry or a released lease); waiting to be claimed.")]
    )
    return paused + lines + _worker_line(job, ctx, held=bool(paused))


def _in_progress(job: Job, ctx: Context) -> list[Reason]:
    holder = job.worker_id or "an unknown worker"
    expires_s = epoch(job.lease_expires_at)
    if expires_s is None:
        return [Reason("warn", f"Running on {holder} with no lease expiry recorded.")]
    left = expires_s - ctx.now_s
    if left <= 0:
        return [
            Reason(
                "bad",
                f"The lease held by {holder} expired {_ago(-left)}; the job awaits recovery "
                f"(runs every {ctx.recovery_interval_s:.0f} s in the workers, or press Recover stuck jobs).",
            )
        ]
    worker = next((w for w in ctx.workers if w.id == job.worker_id), None)
    if worker is None or not is_alive(worker, ctx.now_s, ctx.lease_ttl_s):
        seen = epoch(worker.last_seen_at) if worker else None
        when = f"last seen {_ago(ctx.now_s - seen)}" if seen is not None else "not in the worker registry"
        return [
            Reason(
                "bad",
                f"Lease held by worker {holder}, which stopped heartbeating ({when}); "
                "recovery retries the job once the lease expires, in",
                seconds=left,
            )
        ]
    beat = epoch(job.last_heartbeat_at)
    beat_text = f"; lease renewed {_ago(ctx.now_s - beat)}" if beat is not None else ""
    return [Reason("info", f"Running on {holder}{beat_text}; the lease expires in", seconds=left)]


_EXPLAINERS: dict[JobStatus, Callable[[Job, Context], list[Reason]]] = {
    JobStatus.Queued: _queued,
    JobStatus.Scheduled: _scheduled,
    JobStatus.InProgress: _in_progress,
}


def explain(job: Job, ctx: Context) -> list[Reason]:
    """Reasons the job is where it is; empty for Completed, Failed and Canceled."""
    explainer = _EXPLAINERS.get(job.status)
    return explainer(job, ctx) if explainer else []
