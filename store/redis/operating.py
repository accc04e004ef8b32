"""What the Redis store needs to be operated for months (a mixin of
``RedisStore``): removing jobs (delete, purge by status and age), paused
queues, pruning dead workers, the maintenance-run history and the periodic-job
schedules. Key schema in keys.py; one script per change in ``lua/``.

Round trips: delete 2 (read, guarded script); purge 1 + 1 per SCRIPT_BATCH
jobs; count_purgeable, pause and resume 1; prune_workers 2 + 1 per
SCRIPT_BATCH dead workers; schedules 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from store import lifecycle
from store.errors import InvalidTransition, JobNotFound, ScheduleNotFound
from store.lifecycle import EventKind, JobStatus, Operation
from store.models import MaintenanceRun, QueueState, Schedule
from store.redis import codec
from store.redis.plumbing import GUARD_ATTEMPTS, RedisPlumbing, chunks, codes, op_args
from store.spec import check_actor

S = JobStatus


class OperatingMixin(RedisPlumbing):
    """Delete, retention, queues, worker pruning, maintenance runs, schedules."""

    # ------------------------------------------------------------- removal
    def delete(self, job_id: str, *, actor: str = "operator") -> None:
        """See JobStore.delete: read the status, check DELETE's sources with
        the lifecycle, remove the job in one script guarded by that status
        (lua/delete.lua); re-read when it changed meanwhile."""
        check_actor(actor)
        code = None
        for _ in range(GUARD_ATTEMPTS):
            [code] = self._fields(job_id, "status")
            if code is None:
                raise JobNotFound(job_id)
            lifecycle.check_operation(job_id, Operation.DELETE, S(int(code)))
            args = self._args(*op_args(Operation.DELETE), job_id, code, actor)
            reply = self._eval(self._lua.delete, self._route, args)
            if reply[0] == 1:
                return
            if reply[0] == -1:
                raise JobNotFound(job_id)
        status = S(int(code or 0)).name
        raise InvalidTransition(job_id, status, "deleted", operation=Operation.DELETE.value)

    def _purge(self, older_than_s: float, limit: int, statuses: tuple[int, ...]) -> int:
        """Engine half of purge: a read of candidates (lua/purge_candidates.lua,
        by status then oldest first), then guarded deletes (lua/purge.lua,
        SCRIPT_BATCH jobs a script call)."""
        age = repr(float(older_than_s))
        args = [self._offset(), age, codes(statuses), limit]
        ids = self._eval(self._lua.purge_candidates, self._route, args)
        deleted = 0
        for chunk in chunks(ids):
            deleted += int(self._eval(self._lua.purge, self._route, self._args(age, codes(statuses), *chunk)))
        return deleted

    def _count_purgeable(self, older_than_s: float, statuses: tuple[int, ...]) -> int:
        """ZCOUNT of the updated:<status> zsets below now - age (lua/purge_count.lua)."""
        args = [self._offset(), repr(float(older_than_s)), codes(statuses)]
        return int(self._eval(self._lua.purge_count, self._route, args))

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

    # ------------------------------------------------------------- workers
    def prune_workers(self, older_than_s: float) -> list[str]:
        """Ids not seen since the store's clock minus ``older_than_s`` are read
        from the workers zset, then removed by lua/prune_workers.lua, which
        keeps any that beat meanwhile."""
        age = float(older_than_s)
        before = self.now() - age
        [ids] = self._pipe(lambda p: p.zrangebyscore(self.keys.workers, "-inf", f"({before!r}"))
        pruned: list[str] = []
        for chunk in chunks(ids):
            pruned += self._eval(self._lua.prune_workers, self._route, [self._offset(), repr(age), *chunk])
        return pruned

    # ---------------------------------------------------- maintenance runs
    def record_maintenance_run(self, run: MaintenanceRun) -> None:
        """Append a run to its task's history (lua/record_run.lua), which keeps
        the newest settings.recovery_runs_kept."""
        record = codec.dumps(run.to_record())
        args = [run.started_at.timestamp(), record, self.settings.recovery_runs_kept, run.task]
        self._eval(self._lua.record_run, self._route, args)

    def maintenance_runs(self, task: str, limit: int = 20) -> list[MaintenanceRun]:
        if limit <= 0:
            return []
        key = self.keys.maintenance_runs(task)
        [texts] = self._pipe(lambda p: p.zrange(key, 0, limit - 1, desc=True))
        return [codec.maintenance_run_from_json(text) for text in texts]

    # ----------------------------------------------------------- schedules
    def save_schedules(self, schedules: Sequence[Schedule]) -> None:
        """Upsert the definitions, SCRIPT_BATCH a script call (lua/schedule_save.lua)."""
        for chunk in chunks(schedules):
            args: list[Any] = []
            for s in chunk:
                args += [
                    s.name,
                    s.handler,
                    s.cron,
                    s.timezone,
                    s.queue,
                    codec.dumps(s.payload),
                    int(s.catch_up),
                ]
            self._eval(self._lua.schedule_save, self._route, args)

    def schedules(self) -> list[Schedule]:
        [names] = self._pipe(lambda p: p.zrange(self.keys.schedules, 0, -1))
        hashes = self._pipe(lambda p: [p.hgetall(self.keys.schedule(name)) for name in names])
        return [codec.schedule_from_hash(h) for h in hashes if h]

    def set_schedule_enabled(self, name: str, enabled: bool) -> Schedule:
        flat = self._eval(self._lua.schedule_enable, self._route, [1 if enabled else 0, name])
        if not flat:
            raise ScheduleNotFound(name)
        return codec.schedule_from_hash(codec.flat_to_dict(flat))

    def record_tick(self, name: str, tick_at: float, job_id: str) -> None:
        self._eval(self._lua.schedule_tick, self._route, [repr(float(tick_at)), job_id, name])
