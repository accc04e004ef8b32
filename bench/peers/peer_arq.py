"""arq: asyncio, Redis. ``enqueue_job`` per job (no bulk API), awaited one at a
time on one event loop; results not kept (``keep_result=0``, as the other
peers run without results). Workers: P processes of ``arq
peer_arq.WorkerSettings`` (it has no multi-process mode), each running up to
``max_jobs`` jobs at once and polling the queue every ``poll_delay`` seconds
(default 0.5 s, which bounds both its latency and its drain rate: it starts at
most ``max_jobs`` jobs a poll)."""

from __future__ import annotations

import asyncio
import os
import sys

import common
from arq import create_pool
from arq.connections import RedisSettings

REDIS = RedisSettings.from_dsn(common.URL)


async def noop(ctx):
    await ctx["redis"].incr(common.COUNTER)


async def stamp(ctx, seq):
    import time

    await ctx["redis"].rpush(common.TIMES, f"{seq} {time.time()!r}")


class WorkerSettings:
    functions = [noop, stamp]
    redis_settings = REDIS
    keep_result = 0
    max_jobs = int(os.environ.get("BENCH_ARQ_MAX_JOBS", "10"))
    poll_delay = float(os.environ.get("BENCH_ARQ_POLL_S", "0.5"))
    log_results = False


class Arq(common.System):
    name = "arq"
    DEFAULT = {"p": 2, "max_jobs": 50, "poll_s": 0.01}
    SWEEP = [
        {"p": 2, "max_jobs": 10, "poll_s": 0.5},
        {"p": 1, "max_jobs": 50, "poll_s": 0.01},
        {"p": 2, "max_jobs": 50, "poll_s": 0.01},
        {"p": 2, "max_jobs": 200, "poll_s": 0.01},
    ]

    def __enter__(self):
        self.loop = asyncio.new_event_loop()
        self.pool = self.loop.run_until_complete(create_pool(REDIS))
        return self

    def __exit__(self, *exc):
        self.loop.run_until_complete(self.pool.aclose())
        self.loop.close()

    def worker(self, config):
        bin_dir = sys.executable.rsplit("/", 1)[0]
        one = ["env", f"BENCH_ARQ_MAX_JOBS={config['max_jobs']}", f"BENCH_ARQ_POLL_S={config['poll_s']}",
               f"{bin_dir}/arq", "peer_arq.WorkerSettings"]  # fmt: skip
        return ["sh", "-c", f'for i in $(seq {config["p"]}); do "$@" & done; wait', "sh", *one]

    def describe(self, config):
        return f"{config['p']} × arq, max_jobs {config['max_jobs']}, poll_delay {config['poll_s']:g} s"

    def enqueue_one(self, seq):
        job = self.pool.enqueue_job("noop") if seq is None else self.pool.enqueue_job("stamp", seq)
        self.loop.run_until_complete(job)


if __name__ == "__main__":
    import peer_arq  # functions must be named peer_arq.*, not __main__.*

    common.main(peer_arq.Arq)
