"""Locks, the worker registry and the recovery-run history of the Redis store.

A mixin of ``RedisStore``; none of these touch jobs.
"""

from __future__ import annotations

import time

from store.errors import WorkerNotFound
from store.models import LockInfo, RecoveryRun, WorkerInfo, ts
from store.redis import codec
from store.redis.connect import unavailable
from store.redis.plumbing import RedisPlumbing


class RegistryMixin(RedisPlumbing):
    """Locks (``lock_*.lua``), workers (``worker_*.lua``) and recovery runs."""

    # ----------------------------------------------------------------- locks
    def acquire_lock(self, name: str, owner: str, ttl_s: float) -> bool:
        """Take or extend the lock for ``ttl_s`` seconds of the store's clock
        (set-if-free in one script; see lua/lock_acquire.lua)."""
        args = [self._offset(), owner, repr(float(ttl_s)), name]
        return self._eval(self._lua.lock_acquire, self._route, args) == 1

    def release_lock(self, name: str, owner: str) -> bool:
        """Compare-and-delete: True when ``owner`` held the lock."""
        return self._eval(self._lua.lock_release, self._route, [owner, name]) == 1

    def lock_info(self, name: str) -> LockInfo:
        """The unexpired holder of the lock, or a LockInfo with None fields."""
        held = self._eval(self._lua.lock_info, self._route, [self._offset(), name])
        return LockInfo(name, held[0], ts(float(held[1]))) if held else LockInfo(name, None, None)

    # --------------------------------------------------------------- workers
    def worker_heartbeat(self, info: WorkerInfo, *, register: bool = False) -> str | None:
        """Register or refresh a worker; last_seen_at from the store's clock.
        ``register`` first clears a command left for an earlier process under
        this id (HDEL; a command sent in between is for this process).
        Returns the operator's command left for it (kept across beats), or None."""
        if register:
            with unavailable():
                self._client.hdel(self.keys.worker(info.id), "command", "command_by")
        started = info.started_at.timestamp() if info.started_at else time.time()
        args = [self._offset(), info.id, info.host, info.pid, codec.dumps(list(info.queues))]
        args += [info.concurrency, codec.dumps(list(info.jobs_in_hand)), repr(started)]
        command = self._eval(self._lua.worker_heartbeat, self._route, args)
        if info.handlers:  # a field of the worker's own hash, beside those the script writes
            text = codec.dumps(list(info.handlers))
            self._pipe(lambda p: p.hset(self.keys.worker(info.id), "handlers", text))
        return command

    def _command_worker(self, worker_id: str, command: str, actor: str) -> WorkerInfo:
        """Set the worker hash's command and command_by (for UNQUIET: clear
        them when the command is quiet), if it is registered
        (lua/command_worker.lua). Raises WorkerNotFound."""
        flat = self._eval(self._lua.command_worker, self._route, [command, actor, worker_id])
        if not flat:
            raise WorkerNotFound(worker_id)
        return codec.worker_from_hash(codec.flat_to_dict(flat))

    def remove_worker(self, worker_id: str) -> None:
        """Drop a worker from the registry."""
        self._eval(self._lua.worker_remove, self._route, [worker_id])

    def workers(self) -> list[WorkerInfo]:
        """Registered workers, most recently seen first (two round trips)."""
        [ids] = self._pipe(lambda p: p.zrange(self.keys.workers, 0, -1, desc=True))
        hashes = self._pipe(lambda p: [p.hgetall(self.keys.worker(w)) for w in ids])
        # A hash without its id is a stray "handlers" field written after the
        # entry was removed (the write follows the heartbeat script): skipped.
        return [codec.worker_from_hash(h) for h in hashes if h.get("id")]

    # ------------------------------------------------------- recovery runs
    def record_recovery_run(self, run: RecoveryRun) -> None:
        """Append a run; the history keeps the newest settings.recovery_runs_kept."""
        args = [run.started_at.timestamp(), codec.run_to_json(run), self.settings.recovery_runs_kept, ""]
        self._eval(self._lua.record_run, self._route, args)

    def recovery_runs(self, limit: int = 50) -> list[RecoveryRun]:
        """Recovery history, newest first."""
        if limit <= 0:
            return []
        [texts] = self._pipe(lambda p: p.zrange(self.keys.recovery_runs, 0, limit - 1, desc=True))
        return [codec.run_from_json(text) for text in texts]
