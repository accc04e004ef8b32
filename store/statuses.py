"""A job's statuses (``JobStatus``) and the kinds of its events
(``EventKind``): the names the stores write, the API and console show and
metrics count. Which status may follow which, and what each operation does,
is the lifecycle table's (store/lifecycle.py).

Pure: no I/O, no store imports.
"""

from __future__ import annotations

import enum
from typing import Final


class JobStatus(enum.IntEnum):
    """A job's status. The integer is the wire code the stores keep; the
    member name (``"InProgress"``) is what the API and console show."""

    Queued = 100
    Scheduled = 200
    InProgress = 300
    Completed = 400
    Failed = 500
    Canceled = 600

    @classmethod
    def parse(cls, value: str | int) -> JobStatus:
        """Accept a name (case-insensitive, ``in_progress`` too) or a wire code.

        Raises ValueError naming the accepted values."""
        if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
            try:
                return cls(int(value))
            except ValueError:
                pass
        else:
            wanted = value.replace("_", "").replace("-", "").lower()
            for status in cls:
                if status.name.lower() == wanted:
                    return status
        names = ", ".join(s.name for s in cls)
        raise ValueError(f"unknown status {value!r}; expected one of {names}")


class EventKind(enum.StrEnum):
    """Kinds of job event, the one list of names Python, SQL and Lua write
    (Lua receives them in ARGV) and metrics read back. The value is the wire
    form stored with each event and in the ``e:<kind>`` counters."""

    ENQUEUED = "enqueued"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    RETRY_SCHEDULED = "retry_scheduled"  # a handler failure (nack, timeout) with a retry left
    FAILED = "failed"  # a handler failure that ended Failed
    LEASE_EXPIRED = "lease_expired"  # recovery: retried or failed
    RELEASED = "released"
    CANCELED = "canceled"
    REQUEUED = "requeued"
    RETRIED_NOW = "retried_now"
    DELETED = "deleted"  # kept in the audit log only: the job and its own events are gone
    QUEUE_PAUSED = "queue_paused"  # audit only (no job): the message names the queue
    QUEUE_RESUMED = "queue_resumed"
    BULK_STARTED = "bulk_started"  # audit only: a bulk operation's action, filter and count
    BULK_FINISHED = "bulk_finished"  # audit only: its outcome
    WORKER_COMMANDED = "worker_commanded"  # audit only: an operator's quiet or stop for a worker
    WORKER_FORGOTTEN = "worker_forgotten"  # audit only: an operator removed a worker's entry
    SCHEDULE_ENABLED = "schedule_enabled"  # audit only: a periodic job turned on
    SCHEDULE_DISABLED = "schedule_disabled"  # audit only: a periodic job turned off
    SCHEDULE_RUN = "schedule_run"  # audit only: a periodic job run now by an operator
    JOBS_PURGED = "jobs_purged"  # audit only: an operator's purge (API, CLI) and its count
    COMPLETION_REFUSED = "completion_refused"
    FAILURE_REFUSED = "failure_refused"
    HEARTBEAT_REFUSED = "heartbeat_refused"
    RELEASE_REFUSED = "release_refused"
    PROGRESS_REFUSED = "progress_refused"
    DEPENDENCIES_MET = "dependencies_met"  # a waiting job's last parent finished: Queued
    QUEUE_LIMITS_SET = "queue_limits_set"  # audit only: the message names the queue and its limits
    BATCH_CANCELED = "batch_canceled"  # audit only: the message names the batch
    ALERT_CHANGED = "alert_changed"  # audit only: an alert rule created, deleted, muted or tested
    EXPIRED = "expired"  # a claim found the job past its expires_at: Canceled, never run


#: Refusal kinds: a stale write (wrong token, job no longer InProgress) that
#: changed nothing and was recorded as an event.
REFUSALS: Final[frozenset[EventKind]] = frozenset(
    {
        EventKind.COMPLETION_REFUSED,
        EventKind.FAILURE_REFUSED,
        EventKind.HEARTBEAT_REFUSED,
        EventKind.RELEASE_REFUSED,
        EventKind.PROGRESS_REFUSED,
    }
)


def refusal_recorded(kind: EventKind, token: int, current_token: int, status: JobStatus) -> bool:
    """Whether a refused worker write is recorded as a job event (and so
    counted). Every refusal is returned to the worker; one is not recorded:
    a heartbeat of a job its own holder's ack already Completed under the same
    token. A worker renews the leases of finished runs until their acks land,
    so a beat sent just before its own ack arrives after it: late, not stale
    (only an ack with the current token reaches Completed)."""
    return not (
        kind is EventKind.HEARTBEAT_REFUSED and status is JobStatus.Completed and current_token == token
    )
