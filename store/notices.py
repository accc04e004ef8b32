"""Wake-ups of idle workers: what a store's ready-job
channel hands a worker (``Notice``) and the listener it opens
(``JobStore.wakeups`` -> ``Wakeups``). Implementations: Redis wake-up lists
(``store/redis/wakeups.py``), PostgreSQL LISTEN (``store/sql/wakeups.py``)."""

from __future__ import annotations

import abc
from dataclasses import dataclass

from store.models import Job


@dataclass(frozen=True, slots=True)
class Notice:
    """A ready-job notice (``Wakeups.wait``): the queue a job became ready on
    and, when the enqueue made exactly one job ready there, ``job``: that job's
    claim handle, opaque outside the store (Redis: its ready-zset member), for
    ``JobStore.claim_notified``. None when the notice names no single job.

    ``leased``: jobs an enqueue already leased to this worker (hand-over,
    Redis: ``Wakeups`` opened with a worker id), InProgress with the
    worker's id and a lease token, as ``claim`` returns them; the worker runs
    them, or releases them when it has no free slot."""

    queue: str
    job: str | None = None
    leased: tuple[Job, ...] = ()


class Wakeups(abc.ABC):
    """One worker's subscription to ready-job notices (``JobStore.wakeups``).
    Used from one thread; ``close`` may be called from another."""

    @abc.abstractmethod
    def wait(self, timeout_s: float) -> Notice | None:
        """Block up to ``timeout_s`` seconds for a notice for one of the
        queues; the notice, or None if none came. Reconnects on its own after
        an outage; raises StoreUnavailable while the store cannot be reached."""

    def give_back(self, notice: Notice) -> None:
        """Return a notice the worker will not act on (its slots filled
        meanwhile) so another worker gets it; nothing to do where every
        worker receives every notice (the default: PostgreSQL NOTIFY)."""
        return None

    def withdraw(self) -> None:
        """The worker has no free slot: take back its registration for
        hand-over, if any (Redis), until its next ``wait``. Nothing to do by
        default."""
        return None

    @abc.abstractmethod
    def close(self) -> None:
        """End the subscription and its connection."""
