"""What one worker process needs to run: the worker options and the store settings.

Built once from the validated app Settings and the ``worker`` command's
options; serialised to JSON to hand it to supervised child processes, so a
child runs with exactly its parent's configuration (including overrides the
app factory applied) without importing the web app.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from store import StoreSettings
from store.lifecycle import JobStatus, RetryPolicy

Pool = Literal["thread", "process"]

#: Default seconds running jobs get to finish after SIGTERM/SIGINT.
DEFAULT_GRACE_S = 10.0
#: Default ``prefetch`` per job slot.
PREFETCH_MULTIPLIER = 4


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """One worker process's configuration (seconds for every ``_s``).

    queues: ``(name, weight)`` pairs, claimed by smooth weighted round robin.
    concurrency: job slots (threads or processes).
    prefetch: most jobs a thread-pool worker claims ahead of its slots when
      jobs are short (None: 4 x ``concurrency``, Celery's default prefetch
      multiplier; 0: never).
    lease_ttl_s: lease requested at claim and renewal; heartbeats every third.
    name: worker id (None: ``host.pid``).
    burst: exit 0 once no job is due and none is running.
    grace_s: time running jobs get after the first SIGTERM/SIGINT.
    recovery_*: the recovery service (LEASEHOLD_RECOVERY_*).
    maintenance_enabled: run retention and dead-worker pruning
      (``store.maintenance``) every ``maintenance_interval_s``
      (LEASEHOLD_MAINTENANCE_INTERVAL); ``retention_s`` holds ``(status name,
      seconds)`` pairs (LEASEHOLD_RETENTION_*, 0 keeps forever),
      ``audit_retention_s`` is LEASEHOLD_RETENTION_AUDIT and
      ``worker_forget_after_s`` is LEASEHOLD_WORKER_FORGET_AFTER.
    store_url, store: where jobs live and the store's defaults (retry policy...).
    handlers: handler modules (LEASEHOLD_HANDLERS).
    log_level: logging level name of the process.
    log_success: log each completed job at INFO (LEASEHOLD_LOG_SUCCESS).
    unknown_handler_grace_s: how long after its enqueue a job whose handler
      this worker lacks is released for another worker rather than failed
      (LEASEHOLD_UNKNOWN_HANDLER_GRACE).
    """

    store_url: str
    queues: tuple[tuple[str, int], ...] = (("default", 1),)
    concurrency: int = 1
    prefetch: int | None = None
    pool: Pool = "thread"
    lease_ttl_s: float = 30.0
    name: str | None = None
    burst: bool = False
    grace_s: float = DEFAULT_GRACE_S
    handlers: tuple[str, ...] = ()
    recovery_enabled: bool = True
    recovery_interval_s: float = 15.0
    recovery_batch: int = 500
    recovery_lock_ttl_s: float = 300.0
    maintenance_enabled: bool = False
    maintenance_interval_s: float = 60.0
    retention_s: tuple[tuple[str, float], ...] = ()
    audit_retention_s: float = 7776000.0
    worker_forget_after_s: float = 300.0
    log_level: str = "INFO"
    log_success: bool = True
    unknown_handler_grace_s: float = 3600.0
    #: Lines of ``ctx.log`` an attempt keeps (LEASEHOLD_JOB_LOG_LINES).
    job_log_lines: int = 1000
    store: StoreSettings = field(default_factory=StoreSettings)

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if self.prefetch is not None and self.prefetch < 0:
            raise ValueError("prefetch must be >= 0")
        if self.pool not in ("thread", "process"):
            raise ValueError("pool must be 'thread' or 'process'")
        if not self.lease_ttl_s > 0:
            raise ValueError("lease TTL must be > 0 seconds")
        if self.grace_s < 0:
            raise ValueError("grace must be >= 0 seconds")
        if not self.queues:
            raise ValueError("name at least one queue")

    @property
    def claim_ahead(self) -> int:
        """Jobs claimed ahead of the slots at most (``prefetch`` resolved)."""
        return PREFETCH_MULTIPLIER * self.concurrency if self.prefetch is None else self.prefetch

    @property
    def queue_names(self) -> list[str]:
        return [name for name, _ in self.queues]

    @property
    def heartbeat_interval_s(self) -> float:
        """Seconds between lease renewals: a third of the lease."""
        return self.lease_ttl_s / 3

    @property
    def retention(self) -> dict[JobStatus, float]:
        """``retention_s`` keyed by status."""
        return {JobStatus[name]: seconds for name, seconds in self.retention_s}

    def worker_id(self) -> str:
        """This process's worker id: ``name``, or ``host.pid``."""
        return self.name or f"{socket.gethostname()}.{os.getpid()}"

    def with_(self, **changes: Any) -> WorkerConfig:
        return replace(self, **changes)

    # ------------------------------------------------------------ transport
    def to_json(self) -> str:
        data = asdict(self)
        data["store"]["retry"] = asdict(self.store.retry)
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> WorkerConfig:
        data = json.loads(text)
        store = data.pop("store")
        store["retry"] = RetryPolicy(**store["retry"])
        data["queues"] = tuple((str(n), int(w)) for n, w in data["queues"])
        data["handlers"] = tuple(data["handlers"])
        data["retention_s"] = tuple((str(n), float(s)) for n, s in data.get("retention_s", ()))
        return cls(**data, store=StoreSettings(**store))
