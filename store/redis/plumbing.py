"""What every part of the Redis store shares: the client, the registered
library functions, the ARGV conventions (``op_args``: the operation whose
row of ``lifecycle.OPERATIONS`` a function applies), refusal recording and the
guarded write of retry decisions (used by ``fail`` and by recovery).

Every call goes through ``_eval`` (a script) or ``_pipe`` (read commands on a
pipeline without MULTI); both turn outages into StoreUnavailable.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from redis import Redis
from redis.cluster import RedisCluster

from store import lifecycle
from store.base import StoreSettings
from store.errors import LeaseLost, ValidationError
from store.ids import new_id, new_id_on_shard
from store.lifecycle import EventKind, FailureDecision, JobStatus, Operation
from store.models import failure_event, refusal_message, trimmed_error
from store.redis import codec
from store.redis.connect import ClientOptions, open_client, unavailable, url_shards
from store.redis.functions import Scripts
from store.redis.keys import Keys
from store.statuses import refusal_recorded

T = TypeVar("T")
#: Most jobs one script call works on. Redis runs one script at a time, so this
#: bounds how long a batch blocks every other client (heartbeats included): a
#: batch of MAX_BATCH jobs is several script calls of at most SCRIPT_BATCH each.
SCRIPT_BATCH = 100
#: Read-then-guarded-write attempts (fail, operator actions, delete) when the
#: job changed between the read and the script.
GUARD_ATTEMPTS = 4


def chunks(items: Sequence[T], size: int = SCRIPT_BATCH) -> Iterator[Sequence[T]]:
    """``items`` in consecutive slices of at most ``size``."""
    for i in range(0, len(items), size):
        yield items[i : i + size]


def codes(statuses: Iterable[int]) -> str:
    """Statuses as the scripts take them: ``"100 200"``."""
    return " ".join(str(int(s)) for s in statuses)


def op_args(op: Operation) -> list[str]:
    """ARGV[4] of the function of ``op``: the operation's name. Its row of
    lifecycle.OPERATIONS is compiled into the library (scripts.py
    ``operations_table``, read by lib/job.lua ``operation``)."""
    return [op.value]


def refusal(op: Operation) -> EventKind:
    """The event a stale worker write of ``op`` records (lifecycle table).
    Raises ValueError for an operator operation, which has none."""
    kind = lifecycle.rule(op).refusal
    if kind is None:
        raise ValueError(f"{op.value} has no refusal event")
    return kind


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard ``index`` of a sharded store: the client it shares with the
    other shards and its namespace's prefix (store/redis/shards/)."""

    client: Redis | RedisCluster
    prefix: str
    index: int


@dataclass(frozen=True, slots=True)
class Failure:
    """One retry decision to apply, with the state it was decided from:
    ``token`` and ``retry_count`` are the guard, ``expired`` marks recovery."""

    job_id: str
    queue: str
    token: int
    retry_count: int
    decision: FailureDecision
    error: dict[str, Any]
    expired: bool
    actor: str | None


class RedisPlumbing:
    """The client and scripts of one store handle (see RedisStore)."""

    def __init__(
        self,
        url: str,
        settings: StoreSettings | None = None,
        *,
        prefix: str | None = None,
        shard: Shard | None = None,
        **client: Any,
    ) -> None:
        self.url = url
        self.settings = settings or StoreSettings()
        #: Seconds added to Redis TIME; tests move time with it.
        self.clock_offset_s = 0.0
        if shard is None:
            if url_shards(url) > 1:
                raise ValidationError(
                    "shards", "a sharded store is opened with open_store (store/redis/shards/)"
                )
            self._client, name = open_client(url, prefix, ClientOptions(**client))
            self._new_id: Callable[[], str] = new_id
        else:  # one shard of a sharded store (store/redis/shards/): its client, its prefix
            self._client, name = shard.client, shard.prefix
            self._new_id = partial(new_id_on_shard, shard.index)
        self.keys = Keys(name)
        #: KEYS of every function call: the prefix (lua/lib/keys.lua).
        self._route = [self.keys.route]
        self._lua = Scripts.load(self._client, self.keys.libraries)
        self._writer_lock = threading.Lock()
        self._writer_of: tuple[int, Redis | None] = (0, None)

    def _offset(self) -> str:
        """ARGV[1] of every script that reads the clock: ``"0"`` when there is
        no offset (lib/clock.lua then reads no number), else seconds."""
        offset = float(self.clock_offset_s)
        return repr(offset) if offset else "0"

    def _args(self, *rest: Any) -> list[Any]:
        """ARGV of a job script: clock offset, events kept per job, 0 (unused:
        lua/lib/job.lua), then ``rest``."""
        return [self._offset(), self.settings.events_per_job, 0, *rest]

    def _eval(self, script: Any, keys: list[str], args: list[Any], client: Any = None) -> Any:
        """Call a function of the library (on ``client``, default the pooled one)."""
        with unavailable():
            return script(keys=keys, args=args, client=client)

    def _writer(self) -> Redis | RedisCluster:
        """The client of one writer at a time (store/group_commit.py's): one
        connection of the pool held for it (``single_connection_client``), so
        a call skips redis-py's checkout and check-in of a pooled connection,
        a quarter of the client's time of a round trip (bench/RESULTS.md,
        single enqueue). Made in the process that uses it (a fork makes its
        own). A cluster client has no such mode: the pooled one."""
        if isinstance(self._client, RedisCluster):
            return self._client
        with self._writer_lock:
            pid, writer = self._writer_of
            if writer is None or pid != os.getpid():
                with unavailable():  # it takes (so opens) its connection now
                    writer = Redis(
                        connection_pool=self._client.connection_pool, single_connection_client=True
                    )
                self._writer_of = (os.getpid(), writer)
            return writer

    def _pipe(self, fill: Callable[[Any], object]) -> list[Any]:
        """Queue read commands on a pipeline (no MULTI) with ``fill``; run them."""
        with unavailable():
            pipe = self._client.pipeline(transaction=False)
            fill(pipe)
            return pipe.execute()

    def _fields(self, job_id: str, *names: str) -> list[str | None]:
        """Some fields of a job hash (all None when there is no such job)."""
        [values] = self._pipe(lambda p: p.hmget(self.keys.job(job_id), names))
        return values

    def _refusals(
        self, kind: EventKind, actor: str | None, refused: list[tuple[str, int, str, str]]
    ) -> list[LeaseLost]:
        """Record one refusal event per ``(job_id, token, current token,
        status code)`` that ``statuses.refusal_recorded`` keeps (events of
        jobs deleted meanwhile are dropped) and return the LeaseLost errors of
        all, in order."""
        lost = []
        for chunk in chunks(refused):
            args = self._args()
            for job_id, token, current, code in chunk:
                status = JobStatus(int(code))
                lost.append(LeaseLost(job_id, token, int(current), status.name))
                if not refusal_recorded(kind, token, int(current), status):
                    continue
                message = refusal_message(kind, actor, token, current, status)
                args += [job_id, kind.value, actor or "", token, message]
            if len(args) > len(self._args()):
                self._eval(self._lua.record_events, self._route, args)
        return lost

    def _apply_failures(self, items: Sequence[Failure], *, want_jobs: bool) -> list[Any]:
        """Apply retry decisions as compare-and-set per job
        (lua/apply_failures.lua, SCRIPT_BATCH jobs a call), each with its
        failed attempt (error traceback cut by trimmed_error). Per item: 0 when
        its guard missed (nothing written), else 1, or the job as a flat hash
        with ``want_jobs``."""
        replies = []
        for chunk in chunks(items):
            args = self._args(*op_args(Operation.FAIL), 1 if want_jobs else 0)
            for f in chunk:
                error = trimmed_error(f.error)
                kind, message = failure_event(f.decision, error, f.expired)
                delay = "" if f.decision.delay_s is None else repr(float(f.decision.delay_s))
                args += [f.job_id, f.token, f.retry_count, int(f.decision.status), f.decision.retry_count]
                args += [
                    delay,
                    codec.dumps(error),
                    1 if f.expired else 0,
                    kind.value,
                    message,
                    f.actor or "",
                ]
            replies += self._eval(self._lua.apply_failures, self._route, args)
        return replies

    def now(self) -> float:
        """Redis TIME (of the node holding the deployment's slot) + clock_offset_s."""
        return float(self._eval(self._lua.now, self._route, [self._offset()]))

    def close(self) -> None:
        """Close the client's connections."""
        pid, writer = self._writer_of
        if writer is not None and pid == os.getpid():
            writer.close()  # its connection back to the pool, which closes next
        self._client.close()
