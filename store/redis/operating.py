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
        if limit is None:
            args = [self._offset(), repr(float(older_than_s)), codes(statuses)]
            return int(self._eval(self._lua.purge_count, self._route, args))
        candidates = self._purge_candidates(older_than_s, statuses, limit)
        return self._purge_ids(older_than_s, statuses, [job_id for _, _, job_id in candidates])

    def _purge_candidates(
        self, older_than_s: float, statuses: tuple[int, ...], limit: int
    ) -> list[tuple[int, int, str]]:
        """Up to ``limit`` jobs purge would take, in its order, as ``(place
        of the status in statuses, last update in µs, id)``."""
        args = [self._offset(), repr(float(older_than_s)), codes(statuses), limit]
        flat = self._eval(self._lua.purge_candidates, self._route, args)
        place = {str(code): i for i, code in enumerate(statuses)}
        triples = zip(flat[0::3], flat[1::3], flat[2::3], strict=True)
        return [(place[status], int(score), job_id) for job_id, score, status in triples]

    def _purge_ids(self, older_than_s: float, statuses: tuple[int, ...], ids: list[str]) -> int:
        """Delete ``ids`` (purge candidates), each guarded by lua/purge.lua
        (finished with one of ``statuses``, older than the age); how many went."""
        age = repr(float(older_than_s))
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
