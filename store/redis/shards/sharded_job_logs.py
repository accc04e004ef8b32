"""Job logs of a sharded Redis store (store/job_logs.py): a job's lines
live on its shard, beside the job (store/redis/job_logs.py on each)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from store.log_lines import LogLine
from store.redis import job_logs as one


def append(store: Any, lines: Sequence[LogLine], keep: int) -> None:
    """One MULTI pipeline per shard the lines' jobs are on."""
    by_shard: dict[int, list[LogLine]] = {}
    for line in lines:
        by_shard.setdefault(store.shards.index(store.of_id(line.job_id)), []).append(line)
    for k, mine in by_shard.items():
        one.append(store.shards[k], mine, keep)


def read(store: Any, job_id: str, attempt: int | None, after: int, limit: int) -> tuple[list[dict], int]:
    return one.read(store.of_id(job_id), job_id, attempt, after, limit)


def sweep(store: Any, limit: int) -> int:
    """Each shard's sweep in turn, ``limit`` jobs in all."""
    done = 0
    for shard in store.shards:
        if done < limit:
            done += one.sweep(shard, limit - done)
    return done
