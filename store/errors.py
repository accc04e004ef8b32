"""Typed errors of the JobStore contract (pure; no store imports).

The web layer maps them to HTTP codes: JobNotFound 404, InvalidTransition 409,
LeaseLost 409, StoreUnavailable 503 (StoreTimeout too, with its message),
ValidationError 422.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base of every error a store raises on purpose."""


class JobNotFound(StoreError):
    """No job has this id."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id} not found")
        self.job_id = job_id


class InvalidTransition(StoreError):
    """The job's current status does not allow the requested change."""

    def __init__(self, job_id: str, source: str, target: str, operation: str | None = None) -> None:
        what = f"{operation}: " if operation else ""
        super().__init__(f"{what}job {job_id} cannot go from {source} to {target}")
        self.job_id = job_id
        self.source = source
        self.target = target
        self.operation = operation


class ParentUnfinished(InvalidTransition):
    """A requeue or retry-now of a job one of whose parents has not finished:
    it would run before that parent (lifecycle.AWAIT_PARENTS)."""

    def __init__(self, job_id: str, source: str, operation: str, parent_id: str, parent_status: str) -> None:
        super().__init__(job_id, source, "Queued", operation=operation)
        self.args = (
            f"{operation}: job {job_id} waits for its parent {parent_id}, which is {parent_status}; "
            "it runs when its parents have finished",
        )
        self.parent_id = parent_id
        self.parent_status = parent_status


class LeaseLost(StoreError):
    """An ack, nack, heartbeat or release carried a token that is not the job's
    current lease token (or the job is no longer InProgress). Nothing changed."""

    def __init__(self, job_id: str, token: int, current_token: int | None, status: str | None) -> None:
        super().__init__(
            f"lease on job {job_id} lost: token {token} refused "
            f"(current token {current_token}, status {status})"
        )
        self.job_id = job_id
        self.token = token
        self.current_token = current_token
        self.status = status


class StoreUnavailable(StoreError):
    """The store could not be reached or did not answer in time. The operation
    may or may not have been applied; every write is guarded by status and
    token, so retrying it is safe."""


class StoreTimeout(StoreUnavailable):
    """A read ran longer than the store allows (PostgreSQL's statement timeout,
    LEASEHOLD_PG_STATEMENT_TIMEOUT) and was cancelled; nothing changed. Its
    message names the limit and holds nothing secret (it may be shown)."""


class ValidationError(StoreError, ValueError):
    """An argument is out of range or malformed; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class ScheduleNotFound(StoreError):
    """No periodic job of that name is stored."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no periodic job named {name!r}")
        self.name = name


class WorkerNotFound(StoreError):
    """No registered worker of that id."""

    def __init__(self, worker_id: str) -> None:
        super().__init__(f"no worker {worker_id!r} is registered")
        self.worker_id = worker_id


class WorkerStopping(StoreError):
    """The worker was told to stop; that cannot be taken back (``unquiet``)."""

    def __init__(self, worker_id: str) -> None:
        super().__init__(f"worker {worker_id!r} is stopping; a stop cannot be taken back")
        self.worker_id = worker_id


#: What the refusal tells the operator to run.
UPGRADE_HINT = "run leasehold db upgrade"


class SchemaMismatch(StoreError):
    """The store has no Leasehold schema, or one at another revision."""

    def __init__(self, where: str, found: str | None, expected: str) -> None:
        what = "no Leasehold schema" if found is None else f"revision {found}, expected {expected}"
        if found is not None and found.startswith("sharded:"):  # store/redis/shards/reshard.py
            count = found.partition(":")[2]
            message = f"{where} was moved onto {count} shards: add shards={count} to the store URL"
        else:
            message = f"{where} has {what}: {UPGRADE_HINT}"
        super().__init__(message)
        self.where, self.found, self.expected = where, found, expected


class SchemaUpgradeFailed(StoreError):
    """``upgrade_schema`` could not bring the store to this release's schema;
    the message is the one line to show."""
