"""The sharded Redis store (docs/architecture.md, Shards): N RedisStore
namespaces under the hash tags ``{NAME:0}`` … ``{NAME:N-1}``, one client
shared by them, behind one JobStore.

Routing: a job lives on its queue's shard (``shard_of_queue``) and its id
carries that shard (``store/ids.py``), so every write of one job (ack,
nack, heartbeat, operator actions) goes to one shard from the id alone,
in one Functions call as on one shard. Records (locks, the worker
registry, schedules, operations, recovery runs, alerts, the catalogue)
live on shard 0 (``on_records``). Claims, acks and wake-ups are
``claims.py``'s; limits, batches and relatives ``flow_routing.py``'s.
Counts, history, listings, search, the audit log, purge and recovery
merge the shards here (``merge.py``), leaving out a shard that does not
answer (``health.py``).

A child whose parents sit on other shards, and a batch callback on
another shard than its batch, are released across shards by
``links.py``; idempotency and unique keys stay deployment-wide
(``key_owners.py``). A batch's jobs are of one shard.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from store.base import JobStore
from store.cursor import decode_cursor
from store.defaults import StoreSettings
from store.errors import ValidationError
from store.lifecycle import JobStatus, Operation
from store.models import AuditPage, Job, JobEvent, JobSpec, Page, RecoveredJob
from store.parts import assemble, delegate
from store.redis.connect import ClientOptions, open_client, url_shards
from store.redis.layout import layout_revision
from store.redis.listing import listed_page, merged_entries
from store.redis.plumbing import Shard
from store.redis.search import searched
from store.redis.shards import merge, shard_of_queue, shard_prefix
from store.redis.shards.claims import ShardedClaimsPart
from store.redis.shards.flow_routing import ShardedFlowPart
from store.redis.shards.health import ShardHealth
from store.redis.shards.key_owners import Keys
from store.redis.shards.links import Links, read_hashes
from store.redis.shards.moved_ids import MovedIds
from store.redis.store import RedisStore
from store.search import SearchPage, SearchQuery
from store.shared import SharedStore
from store.spec import unique_key_of


class on_records:  # noqa: N801 - read as a declaration in the class body, as store.parts.delegate
    """``name = on_records()``: the store's ``name`` is shard 0's (records,
    the registry, locks and holds live there)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, store: Any, owner: type | None = None) -> Any:
        if store is None:
            return self
        return getattr(store.shards[0], self.name)


class ShardedRedisStore(JobStore):
    """JobStore on ``shards`` RedisStore namespaces of one server or cluster.

    ``url``: a Redis store URL with ``shards=N`` (2..MAX_SHARDS) and
    optionally ``prefix=NAME`` (the ``prefix`` argument wins); ``client``:
    fields of ``ClientOptions``. Thread-safe. Raises StoreUnavailable when a
    cluster cannot be reached, ValidationError for a bad ``shards``."""

    parts = {"shared": SharedStore, "claims": ShardedClaimsPart, "flow": ShardedFlowPart}

    # shared: SharedStore (front halves; the engine halves below route)
    _changed = delegate("shared")
    _enqueue_one = delegate("shared")
    _handler_policies = delegate("shared")
    _recovery_limit = delegate("shared")
    _search_by_id = delegate("shared")
    cancel = delegate("shared")
    command_worker = delegate("shared")
    complete_many = delegate("shared")
    count_jobs = delegate("shared")
    count_purgeable = delegate("shared")
    counts = delegate("shared")
    delete = delegate("shared")
    enqueue = delegate("shared")
    enqueue_idempotent = delegate("shared")
    enqueue_many = delegate("shared")
    event_counts = delegate("shared")
    expired_lease_count = delegate("shared")
    list_jobs = delegate("shared")
    pause_queue = delegate("shared")
    preview_recovery = delegate("shared")
    purge = delegate("shared")
    queue_event_counts = delegate("shared")
    record_action = delegate("shared")
    record_audit = delegate("shared")
    recover_expired = delegate("shared")
    report_progress_many = delegate("shared")
    requeue = delegate("shared")
    resume_queue = delegate("shared")
    retry_now = delegate("shared")
    search_jobs = delegate("shared")
    # claims: ShardedClaimsPart
    _complete = delegate("claims")
    _report_progress = delegate("claims")
    _visits = delegate("claims")
    claim = delegate("claims")
    claim_notified = delegate("claims")
    claim_retry_after = delegate("claims")
    complete_and_claim = delegate("claims")
    fail = delegate("claims")
    heartbeat = delegate("claims")
    release = delegate("claims")
    wakeups = delegate("claims")
    # flow: ShardedFlowPart
    batch_jobs = delegate("flow")
    cancel_batch = delegate("flow")
    children = delegate("flow")
    create_batch = delegate("flow")
    get_batch = delegate("flow")
    limit_hold = delegate("flow")
    limit_usage = delegate("flow")
    list_batches = delegate("flow")
    parents = delegate("flow")
    queue_limits = delegate("flow")
    set_queue_limits = delegate("flow")

    #: complete_and_claim is one call when the acks and the claim are of one shard.
    fetches_next = True
    supports_flow = True

    def __init__(
        self, url: str, settings: StoreSettings | None = None, *, prefix: str | None = None, **client: Any
    ) -> None:
        count = url_shards(url)
        if count < 2:
            raise ValidationError("shards", "a sharded store has 2 shards or more")
        assemble(self)
        self.url = url
        self.settings = settings or StoreSettings()
        redis, name = open_client(url, prefix, ClientOptions(**client))
        self.prefix = name
        self.shards = [
            RedisStore(url, self.settings, shard=Shard(redis, shard_prefix(name, k), k)) for k in range(count)
        ]
        for shard in self.shards[1:]:
            shard.workers = self.shards[0].workers  # type: ignore[method-assign]  # the registry's
        self.enqueue_chunk = self.shards[0].enqueue_chunk
        self.links = Links(self)
        self.health = ShardHealth()
        self.job_keys = Keys(self)
        self.moved = MovedIds(self)

    # ------------------------------------------------------------ routing
    @property
    def records(self) -> RedisStore:
        """Shard 0: the records' shard."""
        return self.shards[0]

    def of_queue(self, queue: str) -> RedisStore:
        return self.shards[shard_of_queue(queue, len(self.shards))]

    def of_id(self, job_id: str) -> RedisStore:
        """The shard of a job or batch id: its last byte's, or where the
        upgrade moved it (``moved_ids.py``); shard 0 for a text that is no id
        (it then answers JobNotFound as any store does)."""
        try:
            return self.shards[self.moved.shard(job_id)]
        except ValueError:
            return self.shards[0]

    def _by_shard(self, items: Sequence[Any], job_id: Any) -> dict[int, list[int]]:
        """Positions of ``items`` by the shard of ``job_id(item)``, in order."""
        out: dict[int, list[int]] = {}
        self.moved.locate(job_id(item) for item in items)
        for i, item in enumerate(items):
            out.setdefault(self.shards.index(self.of_id(job_id(item))), []).append(i)
        return out

    def _spread(self, items: Sequence[Any], job_id: Any, call: Any) -> list[Any]:
        """``call(shard, its items)`` per shard, answers put back in order."""
        out: list[Any] = [None] * len(items)
        for k, positions in self._by_shard(items, job_id).items():
            answers = call(self.shards[k], [items[i] for i in positions])
            for i, answer in zip(positions, answers, strict=True):
                out[i] = answer
        return out

    # -------------------------------------------------------------- clock
    @property
    def clock_offset_s(self) -> float:
        return self.shards[0].clock_offset_s

    @clock_offset_s.setter
    def clock_offset_s(self, value: float) -> None:
        for shard in self.shards:
            shard.clock_offset_s = value

    def now(self) -> float:
        return self.records.now()

    def unavailable_shards(self) -> dict[int, str]:
        """Shards that did not answer their last call (index -> error): the
        console names them; reads that merge the shards leave them out."""
        return self.health.unavailable()

    def close(self) -> None:
        """Close each shard's writer connection and the client they share."""
        for shard in self.shards:
            shard.close()

    # ------------------------------------------------------------ enqueue
    def _insert(self, specs: Sequence[JobSpec]) -> tuple[list[Job], str | None]:
        """SharedStore._insert per shard: a chunk whose jobs are of one
        shard is one atomic call, as on one shard; across shards, one call a
        shard (each all or nothing). A job with parents on other shards
        (it comes alone) is linked to them first (``links.py``)."""
        if len(specs) == 1:
            spec = specs[0]
            shard = self.of_queue(spec.queue)
            remote = bool(spec.depends_on) and bool(self.links.remote_parents(shard, spec.depends_on or ()))

            def write(job_id: str | None = None) -> tuple[list[Job], str | None]:
                if remote:
                    return self.links.enqueue(spec, job_id)
                if spec.uses_flow:
                    return shard._enqueue_flow(spec, job_id)
                return shard._write_jobs([spec], ids=[job_id] if job_id else ())

            if spec.idempotency_key is not None or unique_key_of(spec) is not None:
                return self.job_keys.enqueue(spec, write)
            if remote:
                return write()
        groups: dict[int, list[int]] = {}
        for i, spec in enumerate(specs):
            groups.setdefault(shard_of_queue(spec.queue, len(self.shards)), []).append(i)
        out: list[Any] = [None] * len(specs)
        for k, positions in groups.items():
            jobs, holder = self.shards[k]._insert([specs[i] for i in positions])
            if not jobs:
                return [], holder
            for i, job in zip(positions, jobs, strict=True):
                out[i] = job
        return out, None

    # --------------------------------------------------------------- read
    # ------------------------------------------------------------ schema
    def schema_revision(self) -> tuple[str | None, str]:
        return layout_revision(self.shards)

    # ---------------------------------------------------------------- read
    def get(self, job_id: str) -> Job:
        return self.of_id(job_id).get(job_id)

    def events(self, job_id: str, limit: int = 200) -> list[JobEvent]:
        return self.of_id(job_id).events(job_id, limit)

    def attempts(self, job_id: str) -> list[Any]:
        return self.of_id(job_id).attempts(job_id)

    def _list(
        self,
        status: JobStatus | None,
        queue: str | None,
        name: str | None,
        limit: int,
        cursor: str | None,
        ascending: bool,
    ) -> Page:
        """A listing merged from the shards' next entries after ``cursor``
        (a keyset position, the same on every shard; one queue: its shard)."""
        if queue is not None:
            return self.of_queue(queue)._list(status, queue, name, limit, cursor, ascending)
        after = decode_cursor(cursor) if cursor else None
        runs = self.health.each(
            self.shards, lambda s: s._entries(status, queue, name, limit + 1, after, ascending)
        )
        entries = merged_entries(runs, limit + 1, ascending)
        ids = [job_id for _, job_id in entries[:limit]]
        hashes = self._spread(
            ids, str, lambda s, mine: s._pipe(lambda p: [p.hgetall(s.keys.job(i)) for i in mine])
        )
        return listed_page(entries, hashes, status, queue, name, limit, bool(cursor))

    def _counter_rows(self) -> list[tuple[str, int]]:
        return merge.summed_rows(self.health.each(self.shards, lambda s: list(s._counter_rows())))

    def _count_named(self, status: JobStatus, queue: str | None, name: str) -> int:
        shards = [self.of_queue(queue)] if queue is not None else self.shards
        return sum(s._count_named(status, queue, name) for s in shards)

    def _search(self, query: SearchQuery, limit: int, scan_limit: int) -> SearchPage:
        """The shards' index streams merged into one scan (``scan_limit``
        counts entries of every shard); probes and reads go to each id's shard."""
        shards = [self.of_queue(query.queue)] if query.queue is not None else self.shards
        streams = [stream for s in shards for stream in s._streams(query)]

        def probe(ids: list[str], q: SearchQuery) -> list[str]:
            kept: set[str] = set()
            for k, at in self._by_shard(ids, str).items():
                kept.update(self.shards[k]._probe([ids[i] for i in at], q))
            return [i for i in ids if i in kept]

        return searched(
            streams, query, limit, scan_limit, probe, lambda ids: self._spread(ids, str, read_hashes)
        )

    def history(self, width_s: int, since: float, queue: str | None = None) -> dict[str, dict[float, int]]:
        if queue is not None:
            return self.of_queue(queue).history(width_s, since, queue)
        return merge.summed_buckets(self.health.each(self.shards, lambda s: s.history(width_s, since)))

    def handler_minutes(self, name: str, since: float) -> dict[int, dict[str, int]]:
        answers = self.health.each(self.shards, lambda s: s.handler_minutes(name, since))
        return merge.summed_buckets(answers)  # type: ignore[return-value]

    def trim_history(self) -> int:
        return sum(s.trim_history() for s in self.shards)

    def audit_page(self, limit: int = 100, cursor: str | None = None) -> AuditPage:
        self.records.audit_page(limit)  # checks the limit as every store does
        return merge.merged_audit(self.shards, limit, cursor)

    def prune_audit(self, older_than_s: float, limit: int = 1000) -> int:
        done = 0
        for shard in self.shards:
            done += shard.prune_audit(older_than_s, limit - done) if done < limit else 0
        return done

    def queue_states(self) -> list[Any]:
        states = self.health.each(self.shards, lambda s: s.queue_states())
        return sorted((q for mine in states for q in mine), key=lambda q: q.name)

    # ----------------------------------------------------------- operator
    def _operator_change(self, job_id: str, op: Operation, actor: str, *, reset_retries: bool) -> Job | None:
        shard = self.of_id(job_id)
        self.links.check_parents(job_id, op)
        job = shard._operator_change(job_id, op, actor, reset_retries=reset_retries)
        self.links.after_write([shard])
        return job

    def _set_paused(self, queue: str, paused: bool, actor: str) -> Any:
        return self.of_queue(queue)._set_paused(queue, paused, actor)

    def _record_audit(self, kind: Any, actor: str, message: str) -> None:
        self.records._record_audit(kind, actor, message)

    def _command_worker(self, worker_id: str, command: str, actor: str) -> Any:
        return self.records._command_worker(worker_id, command, actor)

    def _purge(self, older_than_s: float, limit: int | None, statuses: tuple[int, ...]) -> int:
        """The oldest candidates of every shard merged in purge's order (by
        status, then oldest), the first ``limit`` deleted on their shards."""
        if limit is None:
            return sum(s._purge(older_than_s, None, statuses) for s in self.shards)
        runs = [s._purge_candidates(older_than_s, statuses, limit) for s in self.shards]
        ids = [job_id for _, _, job_id in merge.first_merged(runs, limit, lambda c: c, False)]
        by_shard = self._by_shard(ids, str)
        return sum(
            self.shards[k]._purge_ids(older_than_s, statuses, [ids[i] for i in at])
            for k, at in by_shard.items()
        )

    def _recover(self, limit: int | None, owner: str | None) -> tuple[list[RecoveredJob], int]:
        """Each shard's expired leases in turn until ``limit`` are read."""
        done: list[RecoveredJob] = []
        read = 0
        for shard in self.shards:
            if limit is not None and read >= limit:
                break
            got, n = shard._recover(None if limit is None else limit - read, owner)
            done += got
            read += n
        if owner is not None:  # the safety net: entries a process left when it died
            self.links.drain()
        return done, read

    # ------------------------------------------------- records (shard 0)
    acquire_lock = on_records()
    clear_failures = on_records()
    failure_count = on_records()
    get_operation = on_records()
    held = on_records()
    hold = on_records()
    lock_info = on_records()
    maintenance_runs = on_records()
    operations = on_records()
    prune_failures = on_records()
    prune_workers = on_records()
    record_change = on_records()
    record_drop = on_records()
    record_failure = on_records()
    record_get = on_records()
    record_maintenance_run = on_records()
    record_page = on_records()
    record_prune = on_records()
    record_recovery_run = on_records()
    record_tick = on_records()
    recovery_runs = on_records()
    release_lock = on_records()
    remove_worker = on_records()
    save_operation = on_records()
    save_schedules = on_records()
    schedules = on_records()
    set_schedule_enabled = on_records()
    unhold = on_records()
    worker_heartbeat = on_records()
    workers = on_records()
