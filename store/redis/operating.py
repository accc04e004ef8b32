"""What the Redis store needs to be operated for months (a mixin of
``RedisStore``): removing jobs by status and age (purge; delete is an
operator change, store.py), paused queues. Records (workers, runs,
schedules) are kept through the record port (``records.py``); the history
is read and trimmed by ``history.py``. Key schema in keys.py; one function
per change in ``lua/``.

Round trips: purge 1 + 1 per SCRIPT_BATCH jobs; count_purgeable, pause and
resume 1.
"""

from __future__ import annotations

from store.lifecycle import EventKind
from store.models import QueueState
from store.parts import Part
from store.redis import codec
from store.redis.plumbing import chunks, codes


class RedisOperatingPart(Part):
    """Retention, paused queues."""

    # ------------------------------------------------------------- removal
    def _purge(self, older_than_s: float, limit: int | None, statuses: tuple[int, ...]) -> int:
        """Engine half of purge: a read of candidates (lua/purge_candidates.lua,
        by status then oldest first), then guarded deletes (lua/purge.lua,
        SCRIPT_BATCH jobs a script call). With ``limit`` None: ZCOUNT of the
        statuses' zsets by queue below now - age (lua/purge_count.lua)."""
        age = repr(float(older_than_s))
        if limit is None:
            args = [self._offset(), age, codes(statuses)]
            return int(self._eval(self._lua.purge_count, self._route, args))
        args = [self._offset(), age, codes(statuses), limit]
        ids = self._eval(self._lua.purge_candidates, self._route, args)
        deleted = 0
        for chunk in chunks(ids):
            deleted += int(self._eval(self._lua.purge, self._route, self._args(age, codes(statuses), *chunk)))
        return deleted

    # -------------------------------------------------------------- queues
    def _set_paused(self, queue: str, paused: bool, actor: str) -> QueueState:
        """Pause or resume in one script (lua/queue_state.lua): the paused set
        the claim scripts read, the state, the audit entry and its count."""
        kind = EventKind.QUEUE_PAUSED if paused else EventKind.QUEUE_RESUMED
        args = self._args(queue, 1 if paused else 0, actor, kind.value, f"queue {queue}")
        return codec.queue_state_from_json(queue, self._eval(self._lua.queue_state, self._route, args))

    def queue_states(self) -> list[QueueState]:
        [states] = self._pipe(lambda p: p.hgetall(self.keys.queues))
        return [codec.queue_state_from_json(name, states[name]) for name in sorted(states)]
