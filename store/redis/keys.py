"""Key names of the Redis store: every key of a deployment starts with one
hash tag, ``{prefix}:``, so all of them live in one Redis Cluster slot. The
library's functions (lua/) build the same names inside themselves as the
prefix + a literal + data (``P .. 'job:' .. id``); a call declares only the
prefix itself (``Keys.route``) in KEYS, which routes it to that slot's node,
and Redis refuses a key of another slot at run time.

Key schema (``P`` = prefix):

``{P}:job:<id>``          hash: the job's fields (store/sql/schema.py ``jobs``),
                          JSON fields as JSON text, plus ``rank`` (its member
                          in the ready/scheduled zsets) and the fields its
                          happy path's events are read from (``enqueued_as``,
                          ``run``, ``claimed_from``, ``completed_by``:
                          lua/lib/events.lua ``happen``, codec.derived_events);
                          without what the key or another field says
                          (layout 6, store/redis/layout.py): no ``id``, no
                          ``last_updated_at`` until the job changes, no
                          ``due_at`` without a delay, no ``completed_by``
                          when the lease holder acked, no ``last_heartbeat_at``
                          until the run's first heartbeat; a claimed job
                          keeps its last ``rank``, an ended lease its
                          ``lease_expires_at`` (read only while InProgress)
``{P}:events:<id>``       list: the job's events as JSON, oldest first, capped;
                          not the happy path's (enqueued, claimed, completed)
``{P}:attempts:<id>``     list: the job's failed attempts as JSON, oldest first
                          (written with the failure by lua/apply_failures.lua)
``{P}:logs:<id>:<attempt>``, ``{P}:logs_meta:<id>``, ``{P}:logs_jobs``
                          job logs (store/redis/job_logs.py): a list an attempt,
                          lines pushed an attempt, jobs with lines for the sweep
``{P}:ready:<queue>``     zset, every score 0: due jobs (Queued, and Scheduled ones
                          moved here by a claim once due), member ``rank``
``{P}:scheduled:<queue>`` zset: Scheduled jobs, score due time, member ``rank``
``{P}:leases``            zset: InProgress jobs, score lease_expires_at in whole
                          microseconds (an integer: lua/lib/clock.lua ``micros``):
                          the only index of InProgress jobs (listings and counts
                          of InProgress read it, store/redis/listing.py, lua/counts.lua);
                          plus LEASES_PAD at +inf, which keeps it a skiplist
``{P}:updated:<status>:queue:<queue>``, ``{P}:updated:<status>:name:<name>``
                          zsets: the jobs of one status but InProgress of one
                          queue, of one name, score last_updated_at in whole
                          microseconds, member the id (lua/lib/listing.lua
                          ``list_job``, store/redis/listing.py); no zset of a
                          status alone (layouts 1 to 4 kept ``updated:<status>``)
``{P}:queue_names``       set: every queue a listing zset was ever written for
                          (counts, purges and listings by status walk it)
``{P}:counters``          hash: ``e:<kind>`` totals of the kinds not in HISTORY_KINDS,
                          ``q:<kind>:<queue>`` totals of those in it, ``b:<kind>``
                          an upgraded store's earlier events (store/counters.py);
                          no status counts (lua/counts.lua counts the indexes)
``{P}:idempotency``       hash: idempotency key -> job id
``{P}:unique``            hash: unique key -> id of the job holding it (the job
                          hash keeps its ``unique_key`` too)
``{P}:unique_until``      hash: unique key -> epoch seconds (created_at +
                          unique_for) it stays held after its job finished
``{P}:history:<width>``   hash: ``<bucket start>|<queue>|<kind>`` -> events of a
                          HISTORY_KINDS kind in that bucket (store/counters.py);
                          written for the narrowest width, the wider ones rolled up
                          from it (store/redis/history.py)
``{P}:history_index:<width>`` zset: the fields of that hash, score their bucket
                          start (history reads and trims by score, never scans)
``{P}:history_rolled:<width>`` string: a wider width's first bucket not rolled
                          up yet (lua/trim_history.lua moves it, lua/history.lua
                          sums the narrow buckets from it)
``{P}:hmin:<minute>:<name>`` hash: a handler's minute bucket (store/handler_metrics.py):
                          outcome and run-time bin -> count, written by the
                          ack and fail functions (lua/lib/handler_minutes.lua);
                          expires RETENTION_S after its minute starts
``{P}:audit_log``         zset: operators' events as JSON (with the job id), score
                          their time; pruned by age (store/redis/audit.py)
``{P}:audit``             list of earlier releases (newest first, capped): moved into
                          ``audit_log`` by the first audit read or prune, then gone
``{P}:rec:<kind>:<key>``  hash: a record of the record port (store/redis/records.py):
                          its fields as JSON texts, ``~s`` its score, ``~x`` its
                          expiry; kinds: ``worker`` (the registry), ``hold``
                          (locks: holder, expires_at, token), ``recovery_run``,
                          ``maintenance_run.<task>``, ``operation``,
                          ``operation.open``, ``schedule``, ``failure`` (a
                          counting window, expiring with it)
``{P}:recs:<kind>``       zset: a kind's record keys by score
``{P}:queues``            hash: queue name -> pause state JSON (paused, changed_by, changed_at)
``{P}:paused``            set: names of the paused queues (read by the claim scripts)
``{P}:wakeup:<queue>``    list: wake-up entries of idle workers, at most
                          WAKEUP_KEPT (store/redis/wakeups.py): a ready job's
                          ``rank``, or ``*`` for several
``{P}:idle:<queue>``      zset: workers waiting with a free slot (lua/idle.lua),
                          member ``<lease TTL s> <worker id>``, score the
                          registration's expiry, whole microseconds
``{P}:hand:<worker>``     list: jobs an enqueue leased to that idle worker
                          (lua/lib/hand_over.lua ``hand_over``), each its claim
                          reply entry as JSON; the worker pops them
``{P}:limits``            hash: queue -> its limits as JSON (QueueLimits.to_json
                          without nulls; store/redis/flow.py, lua/lib/flow.lua)
``{P}:running``           hash: queue -> jobs of a limited queue InProgress
``{P}:running_keys:<queue>`` hash: limit key -> those jobs of the queue with it
``{P}:starts:<queue>``    zset: starts in a rate window, member ``<id>:<token>``,
                          score start time; expires after its window
``{P}:key_starts:<queue>\0<key>`` zset: the same, of one limit key
``{P}:rate_keys:<queue>`` zset: limit keys with starts, score their last start
``{P}:libraries``         zset: names of the Functions libraries this namespace
                          loaded, score their last load (store/redis/functions.py
                          ``Library.unload_stale``)
``{P}:key_ready:<queue>\0<key>`` zset, every score 0: the ready members of the
                          queue's jobs with that limit key (byte order = claim
                          order, as ``ready:<queue>``); kept for every job with
                          a limit key, whatever the queue's limits (lua/lib/ready.lua)
``{P}:key_heads:<queue>`` zset, every score 0: the first member of each
                          ``key_ready`` set of the queue: its limit keys in the
                          claim order of their heads (lua/lib/flow_keyed.lua)
``{P}:keyed:<queue>``     zset, every score 0: the ready members of the queue
                          with a limit key (the union of its ``key_ready`` sets),
                          which a claim counts to find jobs without a key at any
                          depth of ``ready:<queue>``
``{P}:parents:<id>``      set: the ids of a job's parents
``{P}:children:<id>``     set: the ids of a job's children (listing, purge)
``{P}:waiting:<id>``      set: the children still waiting for the job to end
``{P}:remote_waiting:<id>`` set: children on other shards still waiting for the
                          job to end (store/redis/shards/); its end leaves an
                          ``outbox`` entry for each
``{P}:outbox``            list: ``[child, parent, outcome, actor]`` JSON entries
                          of parents that ended, to apply on the children's
                          shards (lua/parent_done.lua), removed once applied
``{P}:remote_pending:<id>`` set: a child's parents on other shards it still
                          waits for (an entry applied once: SREM)
``{P}:linked``            string: set on shard 0 once a child was linked to a
                          parent of another shard (then writes drain outboxes)
``{P}:parent_done:<id>``  hash: parent -> outcome, of an entry that came before
                          its child was written (expires after a day)
``{P}:batch:<id>``        hash: a batch or chain: id, kind, size, created_at,
                          callback_job_id, canceled_at, canceled_by
``{P}:batch_jobs:<id>``   list: its jobs' ids in order (not the callback)

``rank`` is ``%07d`` of ``MAX_PRIORITY - priority``, ``%017d`` of the due time
in microseconds, ``:`` and the id (built in ``lua/lib/job.lua``): byte order is
claim order (priority descending, then oldest due, then id), as the SQL store's
``ORDER BY priority DESC, due_at, id``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from store.counters import HISTORY_WIDTHS
from store.errors import ValidationError
from store.lifecycle import JobStatus

#: Prefix when neither the URL (``?prefix=``) nor the constructor names one.
DEFAULT_PREFIX = "leasehold"
#: Length of ``rank`` before the ``:`` that precedes the job id.
RANK_HEAD = 7 + 17
#: A member of the leases zset that is no job (no id is this long), score
#: +inf, added by each claim that leases (ZADD NX, lua/lib/claim.lua): longer
#: than zset-max-listpack-value (64 bytes by default), it turns the zset into
#: a skiplist, which stays one however few jobs are in flight. A listpack
#: zset of 16 to 127 members pays a scan and a memmove at every ZADD and
#: ZREM (a claim and an ack: about 20k instructions each at 16 leases),
#: a skiplist O(log n) (docs/architecture.md, Redis key schema). Readers of
#: the zset skip it: its score is past every lease, and it has no job hash.
LEASES_PAD = "leases-skiplist:" + "-" * 64
#: The lex listing zsets of each status in layouts 1 to 3, by what they were
#: keyed on (store/redis/upgrade.py removes them).
LEX_LISTING_BY = ("queue", "name", "queue_name")

# keys.py and lua/lib/job.lua name a status's zsets by its code, 100 .. 600.
assert [int(s) for s in JobStatus] == list(range(100, 700, 100))


def parse_history_field(field: str) -> tuple[float, str, str]:
    """``(bucket start, queue, kind)`` of a history hash field
    ``<bucket>|<queue>|<kind>`` (written by lua/lib/counts.lua ``flush_counts``;
    a queue may itself contain ``|``, a bucket or kind never does)."""
    bucket, _, rest = field.partition("|")
    queue, _, kind = rest.rpartition("|")
    return float(bucket), queue, kind


def rank_job_id(member: str) -> str:
    """The job id inside a ready/scheduled member (``rank``)."""
    return member[RANK_HEAD + 1 :]


@dataclass(frozen=True, slots=True)
class Keys:
    """Key builders for one deployment. Raises ValidationError for a prefix
    that is empty or contains a brace (it would break the hash tag)."""

    prefix: str
    _common: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.prefix or "{" in self.prefix or "}" in self.prefix:
            raise ValidationError("prefix", "must be non-empty, without { or }")
        common = (self.counters, self.leases, self.audit)
        object.__setattr__(self, "_common", common)

    @property
    def route(self) -> str:
        """The prefix ``{P}:``: KEYS[1] of every function call (lua/lib/keys.lua's
        ``P``), the head of every key name. Never a key of its own."""
        return f"{{{self.prefix}}}:"

    def _key(self, *parts: str) -> str:
        return ":".join((f"{{{self.prefix}}}", *parts))

    def job(self, job_id: str) -> str:
        return self._key("job", job_id)

    def events(self, job_id: str) -> str:
        return self._key("events", job_id)

    def attempts(self, job_id: str) -> str:
        return self._key("attempts", job_id)

    def logs(self, job_id: str, attempt: int) -> str:
        """List: an attempt's job-log lines as JSON, oldest first (store/redis/job_logs.py)."""
        return self._key("logs", job_id, str(attempt))

    def logs_meta(self, job_id: str) -> str:
        """Hash: attempt -> lines ever pushed to its list (the cursor's base)."""
        return self._key("logs_meta", job_id)

    def logs_jobs(self) -> str:
        """Zset: jobs with log lines, score when the sweep looks at them next."""
        return self._key("logs_jobs")

    def ready(self, queue: str) -> str:
        return self._key("ready", queue)

    def scheduled(self, queue: str) -> str:
        return self._key("scheduled", queue)

    def key_ready(self, queue: str, key: str) -> str:
        """Zset: the ready members of ``queue``'s jobs of limit key ``key``."""
        return self._key("key_ready", f"{queue}\0{key}")

    def key_heads(self, queue: str) -> str:
        """Zset: the head member of each ``key_ready`` set of ``queue``."""
        return self._key("key_heads", queue)

    def keyed(self, queue: str) -> str:
        """Zset: the ready members of ``queue`` with a limit key."""
        return self._key("keyed", queue)

    def updated(self, status: JobStatus | None = None) -> str:
        """``updated:<status>``, the zset of a status alone that layouts 1 to
        4 kept; with no status layout 1's all-jobs zset (store/redis/upgrade.py
        removes both)."""
        return self._key("updated") if status is None else self._key("updated", str(int(status)))

    def by_queue(self, status: JobStatus, queue: str) -> str:
        """The listing zset of the jobs of ``status`` in ``queue``."""
        return self._key("updated", str(int(status)), "queue", queue)

    def by_name(self, status: JobStatus, name: str) -> str:
        """The listing zset of the jobs of ``status`` named ``name``."""
        return self._key("updated", str(int(status)), "name", name)

    @property
    def queue_names(self) -> str:
        return self._key("queue_names")

    def lex_listed(self, status: JobStatus, by: str) -> str:
        """Layouts 1 to 3's lex zset of ``status`` by ``by`` (LEX_LISTING_BY)."""
        return self._key("updated", str(int(status)), by)

    @property
    def leases(self) -> str:
        return self._key("leases")

    @property
    def limits(self) -> str:
        return self._key("limits")

    @property
    def libraries(self) -> str:
        """The Functions libraries this namespace loaded, by last load (store/redis/functions.py)."""
        return self._key("libraries")

    def related(self, kind: str, job_id: str) -> str:
        """A job's ``parents``, ``children``, ``waiting`` or ``remote_pending`` set (flow control)."""
        return self._key(kind, job_id)

    @property
    def linked(self) -> str:
        """Set once a sharded store linked a child to a parent of another shard (shard 0's)."""
        return self._key("linked")

    @property
    def outbox(self) -> str:
        """Entries of parents that ended for children on other shards (store/redis/shards/)."""
        return self._key("outbox")

    def batch(self, batch_id: str, part: str = "") -> str:
        """``batch:<id>``, or ``batch_<part>:<id>`` (``jobs``: its jobs' list)."""
        return self._key(f"batch_{part}" if part else "batch", batch_id)

    @property
    def counters(self) -> str:
        return self._key("counters")

    @property
    def idempotency(self) -> str:
        return self._key("idempotency")

    @property
    def unique(self) -> str:
        return self._key("unique")

    @property
    def unique_until(self) -> str:
        return self._key("unique_until")

    def handler_minute(self, minute: int, name: str) -> str:
        """The minute bucket of handler ``name`` that starts at ``minute`` (epoch s)."""
        return self._key("hmin", str(minute), name)

    def history(self, width_s: int) -> tuple[str, str]:
        """The history hash and zset of buckets ``width_s`` seconds wide."""
        return self._key("history", str(width_s)), self._key("history_index", str(width_s))

    def histories(self) -> list[str]:
        """The history hash and zset of each width of HISTORY_WIDTHS, in its order."""
        return [key for width in HISTORY_WIDTHS for key in self.history(width)]

    @property
    def audit(self) -> str:
        """The audit log zset."""
        return self._key("audit_log")

    @property
    def audit_legacy(self) -> str:
        """The audit list of earlier releases (store/redis/audit.py moves it)."""
        return self._key("audit")

    def record(self, kind: str, key: str) -> str:
        """A record of the record port (store/redis/records.py)."""
        return self._key("rec", kind, key)

    def record_index(self, kind: str) -> str:
        """The zset of a record kind's keys by score."""
        return self._key("recs", kind)

    @property
    def queues(self) -> str:
        return self._key("queues")

    @property
    def paused(self) -> str:
        return self._key("paused")

    def wakeup(self, queue: str) -> str:
        """The queue's wake-up list (store/redis/wakeups.py)."""
        return self._key("wakeup", queue)

    def idle(self, queue: str) -> str:
        """The workers registered for hand-over on the queue (lua/idle.lua)."""
        return self._key("idle", queue)

    def hand(self, worker_id: str) -> str:
        """The jobs handed over to one worker (store/redis/wakeups.py)."""
        return self._key("hand", worker_id)

    def common(self) -> list[str]:
        """The deployment-wide keys every function that changes jobs may
        write (lua/lib/job.lua): counters, leases, audit."""
        return list(self._common)
