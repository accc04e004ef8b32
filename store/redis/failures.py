"""Failure counters of the Redis store (a mixin of RedisStore): a hash per
key digest with its count and window end, by the store's clock, expiring in
Redis when its window closes."""

from __future__ import annotations

from store.redis.plumbing import RedisPlumbing


class FailuresMixin(RedisPlumbing):
    """``record_failure``, ``failure_count`` and ``clear_failures`` engine halves."""

    def _record_failure(self, digest: str, window_s: float) -> int:
        args = [self._offset(), repr(window_s), digest]
        return int(self._eval(self._lua.failure_record, self._route, args))

    def _failure_count(self, digest: str) -> tuple[int, float]:
        n, left = self._eval(self._lua.failure_count, self._route, [self._offset(), digest])
        return int(n), max(float(left), 0.0)

    def _clear_failures(self, digest: str) -> None:
        self._pipe(lambda p: p.delete(self.keys.failure(digest)))
