"""Job logs on the Redis store (store/job_logs.py), with plain commands in
one MULTI pipeline a call (every key carries the prefix's hash tag, so a
pipeline stays in one slot on a cluster): an attempt's lines are a list
``logs:<job>:<attempt>`` (RPUSH, then LTRIM to the newest ``keep``),
``logs_meta:<job>`` counts the lines ever pushed an attempt (HINCRBY), so a
line's number is stable while older ones are trimmed, and ``logs_jobs``
lists the jobs with lines for ``sweep``."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import Any

import orjson

from store.log_lines import CURSOR_SPAN, LogLine
from store.redis.connect import unavailable

#: Seconds before the sweep looks again at a job that still exists.
RECHECK_S = 3600.0


def append(store: Any, lines: Sequence[LogLine], keep: int) -> None:
    keys, now = store.keys, max(x.at for x in lines)  # the sweep's first look: no clock read
    with unavailable():
        pipe = store._client.pipeline(transaction=True)
        ordered = sorted(lines, key=lambda x: (x.job_id, x.attempt))
        for (job_id, attempt), group in groupby(ordered, key=lambda x: (x.job_id, x.attempt)):
            entries = [orjson.dumps([x.at, x.level, x.message]) for x in group]
            pipe.rpush(keys.logs(job_id, attempt), *entries)
            pipe.ltrim(keys.logs(job_id, attempt), -keep, -1)
            pipe.hincrby(keys.logs_meta(job_id), str(attempt), len(entries))
            pipe.zadd(keys.logs_jobs(), {job_id: now + RECHECK_S}, nx=True)
        pipe.execute()


def read(store: Any, job_id: str, attempt: int | None, after: int, limit: int) -> tuple[list[dict], int]:
    keys = store.keys
    with unavailable():
        pushed = {int(a): int(n) for a, n in store._client.hgetall(keys.logs_meta(job_id)).items()}
    wanted = sorted(a for a in pushed if (attempt is None or a == attempt) and a >= after // CURSOR_SPAN)
    out: list[dict] = []
    last = after
    for a in wanted:
        with unavailable():
            pipe = store._client.pipeline(transaction=True)
            pipe.hget(keys.logs_meta(job_id), str(a))
            pipe.lrange(keys.logs(job_id, a), 0, -1)
            total, entries = pipe.execute()
        first = int(total or 0) - len(entries) + 1  # the number of the list's first line
        for i, raw in enumerate(entries):
            cursor = a * CURSOR_SPAN + first + i
            if cursor <= after:
                continue
            at, level, message = orjson.loads(raw)
            out.append({"attempt": a, "at": at, "level": level, "message": message})
            last = cursor
            if len(out) >= limit:
                return out, last
    return out, last


def sweep(store: Any, limit: int) -> int:
    keys, now = store.keys, store.now()
    with unavailable():
        due = store._client.zrangebyscore(keys.logs_jobs(), "-inf", now, start=0, num=limit)
        if not due:
            return 0
        pipe = store._client.pipeline(transaction=False)
        for job_id in due:
            pipe.exists(keys.job(job_id))
            pipe.hkeys(keys.logs_meta(job_id))
        found = pipe.execute()
        pipe = store._client.pipeline(transaction=True)
        gone = 0
        for n, job_id in enumerate(due):
            exists, attempts = found[2 * n], found[2 * n + 1]
            if exists:
                pipe.zadd(keys.logs_jobs(), {job_id: now + RECHECK_S}, xx=True)
                continue
            gone += 1
            pipe.delete(keys.logs_meta(job_id), *(keys.logs(job_id, int(a)) for a in attempts))
            pipe.zrem(keys.logs_jobs(), job_id)
        pipe.execute()
    return gone
