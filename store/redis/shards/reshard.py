"""Moving an unsharded Redis namespace onto the shards of a sharded store
(``leasehold db upgrade --shards N``; docs/architecture.md, Shards).

Each key of ``{NAME}`` goes, under the same name after the hash tag, to the
shard its content belongs to (``{NAME}:job:<id>`` to ``{NAME:k}:job:<id>``):
a job's keys to its queue's shard, a queue's keys to that shard, records
(the registry, locks, schedules, operations, alerts, the audit log, handler
minutes) to shard 0, and keys that mix queues (listings by name, leases,
counters, history, idempotency and unique keys) member by member. Ids are
kept: ``moved_ids.py`` routes them afterwards, from ``moved_before``.

The move runs in rounds of BATCH keys (SCAN), a big key by chunks of CHUNK
members, every write idempotent (a whole key is written afresh, a member
set again to its value), so a move that stops half way is finished by
running the command again: the source is deleted only once every key is
copied, and stamped ``sharded:N`` last (a process opening the unsharded URL
then refuses with one line). What it refuses, before writing anything:
workers alive in the namespace's registry (stop them first), a target
namespace that holds jobs of its own, and a waiting job, or a batch, whose
jobs the shards would part (``refusal``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from store.catalogue import ALIVE_TTLS, entries_of, is_live
from store.redis.keys import LEASES_PAD, parse_history_field
from store.redis.layout import layout_key
from store.redis.shards import shard_of_queue
from store.redis.shards.key_copy import CHUNK, chunks, copy_whole, split_hash, split_set, split_zset
from store.redis.shards.key_owners import shard_of_key
from store.redis.shards.moved_ids import holding_shards, id_millis, moved_before_key

#: Keys a round reads and writes.
BATCH = 500
#: A worker counts as alive as the catalogue counts it (``is_live``: ALIVE_TTLS
#: lease TTLs, a TTL it published included), and for ALIVE_MIN_S at least:
#: the command knows the store's default TTL, not the one each worker runs
#: with (a worker beats every third of its own).
ALIVE_MIN_S = 600.0
#: Layout value of a namespace whose keys were moved onto ``N`` shards.
MOVED_LAYOUT = "sharded:{}"

BY_JOB = frozenset(
    {"job", "events", "attempts", "logs", "logs_meta", "parents", "children", "waiting", "parent_done"}
)
BY_BATCH = frozenset({"batch", "batch_jobs"})
BY_QUEUE = frozenset(
    {"ready", "scheduled", "wakeup", "idle", "key_heads", "keyed", "running_keys", "starts", "rate_keys"}
)
BY_QUEUE_AND_KEY = frozenset({"key_ready", "key_starts"})  # <queue>\0<limit key>
ON_RECORDS = frozenset({"rec", "recs", "audit_log", "audit", "hmin"})
HASH_BY_QUEUE = frozenset({"queues", "limits", "running"})  # field: a queue
SET_BY_QUEUE = frozenset({"paused", "queue_names"})  # member: a queue
ZSET_BY_JOB = frozenset({"leases", "logs_jobs", "batch_index"})  # member: a job or batch id
#: Keys each shard makes for itself: its layout stamp, its Functions
#: libraries, and jobs handed to idle workers (leased: recovery takes them).
NOT_MOVED = frozenset({"layout", "libraries", "hand"})
SPLIT = frozenset(
    {
        "updated",
        "counters",
        "history",
        "history_index",
        "history_rolled",
        "idempotency",
        "unique",
        "unique_until",
    }
)
KNOWN = (
    (
        BY_JOB
        | BY_BATCH
        | BY_QUEUE
        | BY_QUEUE_AND_KEY
        | ON_RECORDS
        | HASH_BY_QUEUE
        | SET_BY_QUEUE
        | ZSET_BY_JOB
    )
    | NOT_MOVED
    | SPLIT
)


class ReshardRefused(Exception):
    """The move cannot start; the message is the one line to show."""


@dataclass(slots=True)
class ReshardReport:
    """What a move did: keys copied, jobs among them, source keys deleted."""

    keys: int = 0
    jobs: int = 0
    deleted: int = 0


def kind_of(rest: str) -> str:
    """The kind of a key from its name after ``{NAME}:`` (``job`` of ``job:<id>``)."""
    return rest.split(":", 1)[0]


class Reshard:
    """The move of ``source`` (a RedisStore on ``{NAME}``) onto ``target``
    (a ShardedRedisStore on ``{NAME:0}`` … of the same client)."""

    def __init__(self, source: Any, target: Any) -> None:
        self.source, self.target = source, target
        self.n = len(target.shards)
        self.client = source._client
        self.head = source.keys.route  # "{NAME}:"
        self._job_shard: dict[str, int] = {}
        self._batch_shard: dict[str, int] = {}
        self.moved_before = 0

    # ----------------------------------------------------------- routing
    def _queue_shard(self, queue: str) -> int:
        return shard_of_queue(queue, self.n)

    def _locate_jobs(self, ids: Sequence[str]) -> None:
        """Learn the shards of ``ids`` from their queues (one pipeline); an
        id whose hash is gone from the source (a move run again after its
        deletion began) is looked for on the shards."""
        asked = [i for i in dict.fromkeys(ids) if i not in self._job_shard]
        if not asked:
            return
        queues = self.source._pipe(lambda p: [p.hget(self.source.keys.job(i), "queue") for i in asked])
        for job_id, queue in zip(asked, queues, strict=True):
            if queue is not None:
                self._job_shard[job_id] = self._queue_shard(queue)
                ms = id_millis(job_id)
                self.moved_before = max(self.moved_before, ms or 0)
        gone = [i for i in asked if i not in self._job_shard]
        if gone:
            self._job_shard.update(holding_shards(self.target.shards, gone))

    def job_shard(self, job_id: str) -> int:
        """The shard a job's keys go to (shard 0 for one found nowhere)."""
        self._locate_jobs([job_id])
        return self._job_shard.get(job_id, 0)

    def batch_shard(self, batch_id: str) -> int:
        """A batch's shard: its first job's, else its callback's, else 0."""
        if batch_id not in self._batch_shard:
            keys = self.source.keys
            first, callback = self.source._pipe(
                lambda p: [
                    p.lindex(keys.batch(batch_id, "jobs"), 0),
                    p.hget(keys.batch(batch_id), "callback_job_id"),
                ]
            )
            anchor = first or callback
            if anchor is None:  # a run again after the source's deletion began
                self._batch_shard[batch_id] = holding_shards(self.target.shards, [batch_id]).get(batch_id, 0)
                return self._batch_shard[batch_id]
            self._batch_shard[batch_id] = self.job_shard(anchor)
            self.moved_before = max(self.moved_before, id_millis(batch_id) or 0)
        return self._batch_shard[batch_id]

    def member_shard(self, kind: str, member: str) -> int:
        return self.batch_shard(member) if kind == "batch_index" else self.job_shard(member)

    # ------------------------------------------------------------ checks
    def refusal(self) -> str | None:
        """The one line saying what to stop or change first, or None."""
        now = self.source.now()
        ttl = max(self.source.settings.lease_ttl_s, ALIVE_MIN_S / ALIVE_TTLS)
        alive = [w for w in self.source.workers() if is_live(w, now, ttl, entries_of(w))]
        if alive:
            hosts = ", ".join(sorted({w.host for w in alive}))
            return (
                f"{len(alive)} workers of the unsharded namespace beat in the last "
                f"{ALIVE_TTLS * ttl:.0f} s (on {hosts}): stop them first"
            )
        begun = self.client.exists(moved_before_key(self.target.shards[0]))  # by a run that stopped
        for k, shard in enumerate(self.target.shards):
            if not begun and sum(shard.counts().by_status.values()):
                return f"shard {k} already holds jobs of its own: shard under another prefix"
        for batch in chunks(self._scan(), BATCH):  # a round: one pipeline for the relations read
            unknown = next((k for k in batch if kind_of(self._rest(k)) not in KNOWN), None)
            if unknown is not None:
                return f"key {unknown!r} is of no kind this release knows: upgrade the unsharded store first"
            waits = [k for k in batch if kind_of(self._rest(k)) == "waiting"]
            lists = [k for k in batch if kind_of(self._rest(k)) == "batch_jobs"]
            pipe = self.client.pipeline(transaction=False)
            for key in waits:
                pipe.smembers(key)
            for key in lists:
                pipe.lrange(key, 0, -1)
            found = pipe.execute() if waits or lists else []
            children, members = found[: len(waits)], found[len(waits) :]
            owners = [self._rest(k).split(":", 1)[1] for k in waits + lists]
            self._locate_jobs(owners[: len(waits)] + [i for group in found for i in group])
            for parent, kids in zip(owners[: len(waits)], children, strict=True):
                child = next((c for c in kids if self.job_shard(c) != self.job_shard(parent)), None)
                if child is not None:
                    return (
                        f"job {child} waits for job {parent}, which shards={self.n} puts "
                        "on another shard: let the parent finish first"
                    )
            for batch_id, ids in zip(owners[len(waits) :], members, strict=True):
                if len({self.job_shard(j) for j in ids}) > 1:
                    return (
                        f"batch {batch_id} has jobs in queues that shards={self.n} puts on different shards: "
                        "purge or delete it first"
                    )
        return None

    # -------------------------------------------------------------- move
    def run(self, report: Callable[[str], None] = lambda line: None) -> ReshardReport:
        """Copy every key onto the shards, record ``moved_before``, delete
        the source and stamp it moved; ``report`` gets a line a round.
        Raises ReshardRefused (one line) before writing anything."""
        reason = self.refusal()
        if reason is not None:
            raise ReshardRefused(reason)
        stamp = moved_before_key(self.target.shards[0])
        self.client.set(stamp, 0, nx=True)  # a move begun: a run again finishes it
        done = ReshardReport()
        for batch in chunks(self._scan(), BATCH):  # SCAN may repeat a key: every copy is idempotent
            self._locate_jobs(
                [self._rest(k).split(":")[1] for k in batch if kind_of(self._rest(k)) in BY_JOB]
            )
            whole: list[tuple[str, str]] = []
            for key in batch:
                rest = self._rest(key)
                to = self._whole_target(rest)
                if to is not None:
                    whole.append((key, to))
                else:
                    self._copy_split(key, rest)
                done.jobs += kind_of(rest) == "job"
            copy_whole(self.client, whole)
            done.keys += len(batch)
            report(f"copied {done.keys} keys ({done.jobs} jobs)")
        before = int(self.client.get(stamp) or 0)
        self.client.set(stamp, max(self.moved_before, before))
        for batch in chunks(self._scan(every=True), BATCH):  # deleting while SCAN runs is safe
            done.deleted += self._unlink(batch)
        self.client.set(layout_key(self.source), MOVED_LAYOUT.format(self.n))
        return done

    def has_keys(self) -> bool:
        """Whether the source holds a key to move."""
        return next(self._scan(), None) is not None

    def _rest(self, key: str) -> str:
        return key[len(self.head) :]

    def _unlink(self, keys: Sequence[str]) -> int:
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.unlink(key)
        return sum(pipe.execute())

    def _scan(self, every: bool = False) -> Iterator[str]:
        """The source's keys to move (SCAN MATCH on its hash tag, COUNT
        BATCH); with ``every`` all but its layout stamp (to delete)."""
        pattern = "".join("\\" + c if c in "[]?*\\" else c for c in self.head) + "*"
        for key in self.client.scan_iter(match=pattern, count=BATCH):
            kind = kind_of(self._rest(key))
            if key.startswith(self.head) and (kind not in NOT_MOVED or (every and kind != "layout")):
                yield key

    def _to(self, shard: int, rest: str) -> str:
        return self.target.shards[shard].keys.route + rest

    def _whole_target(self, rest: str) -> str | None:
        """Where a key copied whole goes, or None for a key split by member."""
        kind = kind_of(rest)
        tail = rest[len(kind) + 1 :]
        if kind in BY_JOB:
            return self._to(self.job_shard(tail.split(":")[0]), rest)
        if kind in BY_BATCH:
            return self._to(self.batch_shard(tail), rest)
        if kind in BY_QUEUE:
            return self._to(self._queue_shard(tail), rest)
        if kind in BY_QUEUE_AND_KEY:
            return self._to(self._queue_shard(tail.split("\0", 1)[0]), rest)
        if kind in ON_RECORDS:
            return self._to(0, rest)
        if kind == "updated" and tail.split(":", 2)[1] == "queue":
            return self._to(self._queue_shard(tail.split(":", 2)[2]), rest)
        return None

    def _copy_split(self, key: str, rest: str) -> None:
        """A key whose members go to several shards, member by member."""
        kind, c = kind_of(rest), self.client

        def to(shard: int) -> str:
            return self._to(shard, rest)

        def job_members(members: list[str]) -> None:
            self._locate_jobs([m for m in members if m != LEASES_PAD])

        if kind == "history_rolled":
            copy_whole(c, [(key, to(k)) for k in range(self.n)])
        elif kind == "updated":  # by name: jobs of several queues
            split_zset(c, key, lambda member: [to(self.job_shard(member))], job_members)
        elif kind in HASH_BY_QUEUE:
            split_hash(c, key, lambda field, _value: to(self._queue_shard(field)))
        elif kind in SET_BY_QUEUE:
            split_set(c, key, lambda member: to(self._queue_shard(member)))
        elif kind in ZSET_BY_JOB:  # the leases' pad member goes to every shard
            split_zset(
                c,
                key,
                lambda m: map(to, range(self.n)) if m == LEASES_PAD else [to(self.member_shard(kind, m))],
                job_members,
            )
        elif kind == "counters":
            split_hash(c, key, lambda field, _value: to(self._counter_shard(field)))
        elif kind == "history":
            split_hash(c, key, lambda field, _value: to(self._queue_shard(parse_history_field(field)[1])))
        elif kind == "history_index":
            split_zset(c, key, lambda member: [to(self._queue_shard(parse_history_field(member)[1]))])
        elif kind in ("idempotency", "unique"):
            split_hash(
                c,
                key,
                lambda _field, job_id: to(self.job_shard(job_id)),
                lambda pairs: self._locate_jobs([job_id for _, job_id in pairs]),
            )
            self._own_keys(key, kind)
        elif kind == "unique_until":  # with the key's holder (``unique``)
            holders: dict[str, str] = {}

            def read_holders(pairs: list[tuple[str, str]]) -> None:
                fields = [field for field, _ in pairs]
                holders.update(zip(fields, c.hmget(self.source.keys.unique, fields), strict=True))
                self._locate_jobs([h for h in holders.values() if h])

            split_hash(
                c, key, lambda field, _value: to(self.job_shard(holders.get(field) or "")), read_holders
            )

    def _counter_shard(self, field: str) -> int:
        """``q:<kind>:<queue>`` goes with its queue; other totals to shard 0
        (the sharded store sums every shard's counters)."""
        if field.startswith("q:"):
            return self._queue_shard(field.split(":", 2)[2])
        return 0

    def _own_keys(self, key: str, kind: str) -> None:
        """Each idempotency or unique key's owner, settled, on the key's home
        shard (``key_owners.py``), as a keyed enqueue of the sharded store leaves it."""
        for part in chunks(self.client.hscan_iter(key, count=CHUNK)):
            pipe = self.client.pipeline(transaction=False)
            for field, job_id in part:
                home = self.target.shards[shard_of_key(field, self.n)]
                pipe.hset(home.keys.route + f"key_owner:{kind}", field, job_id)
                pipe.hset(home.keys.route + f"key_state:{kind}", field, "settled")
            pipe.execute()
