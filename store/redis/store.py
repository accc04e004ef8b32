"""The Redis JobStore: a hash per job, sorted sets as indexes, one Redis
Functions library (``lua/``, loaded by ``scripts.py``) with a function per
state change; every key of a deployment is its prefix (which carries the one
hash tag) + a literal + data, built inside the functions (so it runs
unchanged on Redis Cluster; ``keys.py`` has the key schema).

Lifecycle decisions stay in Python (``store.lifecycle``): the rows of its
table are compiled into the library, and the retry decision is made here and
applied by a function as a compare-and-set on (status, lease token,
retry_count[, lease still expired]). Lease times come from Redis ``TIME``
inside the functions, plus ``clock_offset_s``.

A claim is one call (``claim.lua``): due scheduled jobs are moved to the
ready zsets, paused queues skipped, the heads taken in claim order and
leased, and the jobs returned. An idle worker woken by a notice that names
one job (``claim_notified``) leases that member alone.

Unique jobs are decided inside ``enqueue.lua``: the key's holder is looked up
and the new job written in one script, so concurrent enqueues of one unique
job make one job.

The front halves every store shares (validation, chunking, the JSON check of
results, recovery limits and timing, counters as totals) are SharedStore's;
this class supplies the engine halves. Each operation's target, event kind and
the fields it stamps or clears come from ``lifecycle.OPERATIONS``, compiled
into the library; the functions name none of them.

A script call works on at most SCRIPT_BATCH jobs (plumbing.py), which bounds
how long Redis is blocked. Round trips: enqueue_many 1 per SCRIPT_BATCH jobs
(each chunk all or nothing); claim 1 per SCRIPT_BATCH jobs; heartbeat,
complete_many and report_progress_many 1 per SCRIPT_BATCH (+1 when some are
refused); release 1; fail and operator actions 2; recovery 2 + 1 per
SCRIPT_BATCH.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import cached_property
from typing import Any

from store import lifecycle
from store.base import JobStore
from store.bookings import Bookings
from store.errors import InvalidTransition, JobNotFound, ParentUnfinished
from store.group_commit import GroupCommit
from store.lifecycle import JobStatus, Operation
from store.models import Attempt, Job, JobEvent, JobSpec, ts
from store.parts import assemble, delegate
from store.redis import codec
from store.redis.audit import RedisAuditPart
from store.redis.batch_list import RedisBatchListPart
from store.redis.batches import RedisBatchesPart
from store.redis.history import RedisHistoryPart
from store.redis.layout import layout_revision
from store.redis.leases import RedisLeasesPart
from store.redis.operating import RedisOperatingPart
from store.redis.plumbing import (
    GUARD_ATTEMPTS,
    SCRIPT_BATCH,
    RedisPlumbing,
    op_args,
)
from store.redis.records import RedisRecordsPart
from store.redis.recovery import RedisRecoveryPart
from store.redis.search import RedisSearchPart
from store.redis.wakeups import HandOver, RedisWakeups
from store.registry import RegistryRecords
from store.shared import SharedStore
from store.spec import unique_key_of


def _keyed(spec: JobSpec) -> bool:
    """Whether a job names an idempotency or unique key (its write can be
    refused: it is not written with other callers' jobs)."""
    return spec.idempotency_key is not None or unique_key_of(spec) is not None


class RedisStore(RedisPlumbing, JobStore):
    """JobStore on Redis or Redis Cluster.

    ``url``: ``redis://host:port/db``, ``rediss://…``, ``redis+cluster://host:port``,
    optionally with ``?prefix=NAME``, the deployment's hash tag (the ``prefix``
    argument wins; default ``leasehold``). ``client``: fields of
    ``ClientOptions`` (timeouts, retries). Thread-safe (redis-py pools
    connections). Raises StoreUnavailable when a cluster cannot be reached."""

    #: enqueue_many writes SCRIPT_BATCH jobs a script call (each chunk all or nothing).
    enqueue_chunk = SCRIPT_BATCH

    # ------------------------------------------------ parts (store/parts.py)
    #: The part objects an engine is made of, by name (each a class of one module).
    parts = {
        "shared": SharedStore,
        "registry": RegistryRecords,
        "bookings": Bookings,
        "flow": RedisBatchesPart,
        "batch_list": RedisBatchListPart,
        "audit": RedisAuditPart,
        "operating": RedisOperatingPart,
        "history": RedisHistoryPart,
        "recovery": RedisRecoveryPart,
        "records": RedisRecordsPart,
        "search": RedisSearchPart,
        "leases": RedisLeasesPart,
    }

    # shared: SharedStore
    _changed = delegate("shared")
    _enqueue_one = delegate("shared")
    _handler_policies = delegate("shared")
    _recovery_limit = delegate("shared")
    _search_by_id = delegate("shared")
    cancel = delegate("shared")
    command_worker = delegate("shared")
    complete_many = delegate("shared")
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
    # registry: RegistryRecords
    _append_run = delegate("registry")
    _command_worker = delegate("registry")
    _runs = delegate("registry")
    acquire_lock = delegate("registry")
    lock_info = delegate("registry")
    maintenance_runs = delegate("registry")
    prune_workers = delegate("registry")
    record_maintenance_run = delegate("registry")
    record_recovery_run = delegate("registry")
    recovery_runs = delegate("registry")
    release_lock = delegate("registry")
    remove_worker = delegate("registry")
    worker_heartbeat = delegate("registry")
    workers = delegate("registry")
    # bookings: Bookings
    clear_failures = delegate("bookings")
    failure_count = delegate("bookings")
    get_operation = delegate("bookings")
    operations = delegate("bookings")
    prune_failures = delegate("bookings")
    record_failure = delegate("bookings")
    record_tick = delegate("bookings")
    save_operation = delegate("bookings")
    save_schedules = delegate("bookings")
    schedules = delegate("bookings")
    set_schedule_enabled = delegate("bookings")
    # flow: RedisBatchesPart
    _enqueue_flow = delegate("flow")
    _flow_specs = delegate("flow")
    _note_retry = delegate("flow")
    _related = delegate("flow")
    _usage = delegate("flow")
    _write_flow = delegate("flow")
    batch_jobs = delegate("flow")
    cancel_batch = delegate("flow")
    children = delegate("flow")
    claim_retry_after = delegate("flow")
    _create_batch = delegate("flow")
    create_batch = delegate("flow")
    get_batch = delegate("flow")
    limit_hold = delegate("flow")
    limit_usage = delegate("flow")
    parents = delegate("flow")
    queue_limits = delegate("flow")
    set_queue_limits = delegate("flow")
    supports_flow = delegate("flow")
    # batch_list: RedisBatchListPart
    _batch_index = delegate("batch_list")
    index_batch = delegate("batch_list")
    list_batches = delegate("batch_list")
    # audit: RedisAuditPart
    _audit_migrated = delegate("audit")
    _migrate_audit = delegate("audit")
    _record_audit = delegate("audit")
    _audit_rows = delegate("audit")
    audit_page = delegate("audit")
    prune_audit = delegate("audit")
    # operating: RedisOperatingPart
    _purge = delegate("operating")
    _purge_candidates = delegate("operating")
    _purge_ids = delegate("operating")
    _set_paused = delegate("operating")
    queue_states = delegate("operating")
    # history: RedisHistoryPart
    _counter_rows = delegate("history")
    handler_minutes = delegate("history")
    history = delegate("history")
    trim_history = delegate("history")
    # recovery: RedisRecoveryPart
    _handed = delegate("recovery")
    _recover = delegate("recovery")
    _recovery_plan = delegate("recovery")
    _release_handed = delegate("recovery")
    # records: RedisRecordsPart
    _alive = delegate("records")
    held = delegate("records")
    hold = delegate("records")
    record_change = delegate("records")
    record_drop = delegate("records")
    record_get = delegate("records")
    record_page = delegate("records")
    record_prune = delegate("records")
    unhold = delegate("records")
    # search: RedisSearchPart
    _both = delegate("search")
    _count_named = delegate("search")
    _entries = delegate("search")
    _indexes = delegate("search")
    _leased = delegate("search")
    _list = delegate("search")
    _merge = delegate("search")
    _probe = delegate("search")
    _queue_names = delegate("search")
    _read_merged = delegate("search")
    _search = delegate("search")
    _streams = delegate("search")
    _walk = delegate("search")
    count_jobs = delegate("search")
    # leases: RedisLeasesPart
    _ack_outcomes = delegate("leases")
    _complete = delegate("leases")
    _lease = delegate("leases")
    _report_progress = delegate("leases")
    claim = delegate("leases")
    claim_notified = delegate("leases")
    complete_and_claim = delegate("leases")
    fail = delegate("leases")
    heartbeat = delegate("leases")
    release = delegate("leases")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        assemble(self)
        super().__init__(*args, **kwargs)

    # ------------------------------------------------------------- enqueue
    def _insert(self, specs: Sequence[JobSpec]) -> tuple[list[Job], str | None]:
        """See SharedStore._insert: the unique check and the insert are one
        script (lua/enqueue.lua); a job with flow options is written by
        lua/enqueue_flow.lua (flow.py)."""
        if specs[0].uses_flow and len(specs) == 1:
            return self._enqueue_flow(specs[0])
        if any(spec.uses_flow for spec in specs):  # limit keys, no keys: one lua/enqueue_flow.lua call
            ids = [self._new_id() for _ in specs]
            self._write_flow(self._flow_specs([(spec, i, ()) for spec, i in zip(specs, ids, strict=True)]))
            found = self._pipe(lambda p: [p.hgetall(self.keys.job(i)) for i in ids])
            return [codec.job_from_hash(i, h) for i, h in zip(ids, found, strict=True)], None
        if len(specs) == 1 and not _keyed(specs[0]):
            return [self._group.insert(specs[0])], None
        return self._write_jobs(specs)

    @cached_property
    def _group(self) -> GroupCommit:
        """Single plain enqueues of concurrent threads in one call (store/group_commit.py)."""
        return GroupCommit(lambda specs: self._write_jobs(specs, self._writer())[0])

    def _write_jobs(
        self, specs: Sequence[JobSpec], client: Any = None, ids: Sequence[str] = ()
    ) -> tuple[list[Job], str | None]:
        """One lua/enqueue.lua call for ``specs`` (on ``client``, default the
        pooled one; ``ids``: theirs, named by a sharded store): the jobs, or
        none and the holder of a key one of them names."""
        rows = []
        args = self._args()
        for i, spec in enumerate(specs):
            job_id = ids[i] if ids else self._new_id()
            status = lifecycle.enqueue_target(spec.delay_s)
            fields = codec.spec_fields(spec, job_id, self.settings)
            unique_for = None if spec.unique_for is None else repr(float(spec.unique_for))
            args += codec.enqueue_values(fields, int(status), codec.delay_text(spec.delay_s), unique_for)
            rows.append((fields, status, float(spec.delay_s)))
        reply = self._eval(self._lua.enqueue, self._route, args, client)
        if reply[0] in ("duplicate", "unique"):
            return [], reply[2]
        now = float(reply[1])  # 'ok' or 'replay': the chunk's created_at, as the hashes hold it
        times: dict[float, dict[str, datetime | None]] = {}  # by delay: a chunk shares its clock
        jobs = []
        for fields, status, delay in rows:
            if delay not in times:
                times[delay] = {f: ts(t) for f, t in lifecycle.enqueue_times(now, delay).items()}
            jobs.append(codec.new_job(fields, status, times[delay]))
        return jobs, None

    # ------------------------------------------------------------ schema
    def schema_revision(self) -> tuple[str | None, str]:
        return layout_revision([self])

    # ---------------------------------------------------------------- read
    def get(self, job_id: str) -> Job:
        [fields] = self._pipe(lambda p: p.hgetall(self.keys.job(job_id)))
        if not fields:
            raise JobNotFound(job_id)
        return codec.job_from_hash(job_id, fields)

    def events(self, job_id: str, limit: int = 200) -> list[JobEvent]:
        """The job's event list with its happy path's events, which the
        functions do not append (lua/lib/job.lua ``happen``), added from the
        job hash: enqueued first, the current run's claimed (and completed)
        last (codec.derived_events)."""
        if limit <= 0:
            return []
        texts, fields = self._pipe(
            lambda p: (
                p.lrange(self.keys.events(job_id), -limit, -1),
                p.hmget(self.keys.job(job_id), codec.DERIVED_FIELDS),
            )
        )
        first, last = codec.derived_events(job_id, dict(zip(codec.DERIVED_FIELDS, fields, strict=True)))
        stored = [codec.event_from_json(text, job_id) for text in texts]
        return [*first, *stored, *last][-limit:]

    # -------------------------------------------------------------- worker
    #: complete_and_claim is one function call (lua/complete_claim.lua).
    fetches_next = True

    def attempts(self, job_id: str) -> list[Attempt]:
        """The job's attempts list (lua/apply_failures.lua), oldest first."""
        [texts] = self._pipe(lambda p: p.lrange(self.keys.attempts(job_id), 0, -1))
        return [codec.attempt_from_json(text) for text in texts]

    def wakeups(
        self, queues: Sequence[str], worker_id: str | None = None, lease_ttl_s: float | None = None
    ) -> RedisWakeups:
        """A blocking pop on the queues' wake-up lists (lua/enqueue.lua
        pushes); with ``worker_id``, also on the worker's hand-over list,
        registered on the queues while it waits (store/redis/wakeups.py)."""
        hand = None
        if worker_id is not None:
            ttl = lease_ttl_s or self.settings.lease_ttl_s

            def register(member: str, hold_s: float, names: Sequence[str]) -> None:
                self._eval(self._lua.idle, self._route, [self._offset(), member, hold_s, *names])

            def release(job: Job) -> None:
                self.release(job.id, job.lease_token, worker_id)

            hand = HandOver(worker_id, ttl, register, release)
        return RedisWakeups(self._client, self.keys, queues, hand)

    # ------------------------------------------------------------ operator
    def _operator_change(self, job_id: str, op: Operation, actor: str, *, reset_retries: bool) -> Job | None:
        """Read the status, check ``op`` with the lifecycle, run its function
        (lua/cancel.lua; lua/requeue.lua for REQUEUE and RETRY_NOW;
        lua/delete.lua) guarded by that status; re-read when it changed
        meanwhile. Raises JobNotFound, InvalidTransition (also when the job
        kept changing)."""
        script = {Operation.CANCEL: self._lua.cancel, Operation.DELETE: self._lua.delete}.get(
            op, self._lua.requeue
        )
        extra = (
            (1 if reset_retries and op is Operation.REQUEUE else 0,) if script is self._lua.requeue else ()
        )
        code = None
        for _ in range(GUARD_ATTEMPTS):
            [code] = self._fields(job_id, "status")
            if code is None:
                raise JobNotFound(job_id)
            lifecycle.check_operation(job_id, op, JobStatus(int(code)))
            reply = self._eval(script, self._route, self._args(*op_args(op), job_id, code, actor, *extra))
            if reply[0] == 1:
                return None if op is Operation.DELETE else codec.job_from_flat(job_id, reply[1])
            if reply[0] == -1:
                raise JobNotFound(job_id)
            if reply[0] == 2:
                parent = JobStatus(int(reply[2])).name
                raise ParentUnfinished(job_id, JobStatus(int(code)).name, op.value, reply[1], parent)
        target = "deleted" if op is Operation.DELETE else lifecycle.target(op).name
        raise InvalidTransition(job_id, JobStatus(int(code or 0)).name, target, operation=op.value)
